"""A bounded window of in-flight work, so waiting for acks overlaps the next items."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Coroutine
from typing import Any


class Window:
    """A bounded number of in-flight outputs, so waiting for acks overlaps the next items.

    Work is spawned as a task with a weight (the outputs it carries); a spawn waits
    while the window holds work and the new weight would overfill it, so work of any
    weight eventually goes. The first failure of a task is kept and re-raised by
    :meth:`check`.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.used = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.error: BaseException | None = None
        self._room: asyncio.Future[None] | None = None

    def __len__(self) -> int:
        return len(self.tasks)

    async def spawn(self, work: Coroutine[Any, Any, None], *, weight: int = 1) -> None:
        while self.used and self.used + weight > self.size:
            if self._room is None or self._room.done():
                self._room = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._room)
        self.used += weight
        task = asyncio.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(functools.partial(self._done, weight))

    def _done(self, weight: int, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self.used -= weight
        if self._room is not None and not self._room.done():
            self._room.set_result(None)
        if not task.cancelled() and task.exception() is not None and self.error is None:
            self.error = task.exception()

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    async def wait(self) -> None:
        """Let every in-flight publish finish, then surface the first failure."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)
        self.check()
