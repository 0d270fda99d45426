"""The one thread a worker runs its node on: ``open``, every call, then ``close``.

Node code never runs on the event loop, so leases, heartbeats and the control
subject stay served however long a call takes (LIFE-4); it always runs on the
same thread, so a node may keep thread-bound state (a device context, a model).

Calls queue up in order and their results come back in order. A batch of calls
is queued at once (one wake-up of the thread), and handing results back costs
one wake-up of the event loop per batch: while the loop has not yet collected
earlier results, later ones join them instead of waking it again. Each result
is handed back as soon as its call returns, not when the whole batch has.

The thread says which call it is in and since when, so the worker can bound a node
call (DELIV-12). A thread whose call never returned is *abandoned*: the stuck call's
future fails with the reason given, every call queued behind it is handed back as not
started (:data:`NOT_STARTED`) and never runs, and whatever is submitted later is handed
back the same way at once.
"""

from __future__ import annotations

import asyncio
import collections
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

_Call = tuple[Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any]"]


class NotStarted(Exception):
    """The call was queued behind one that never returned and was never run."""


NOT_STARTED = NotStarted("the node thread is stuck in an earlier call")


class NodeThread:
    """A dedicated thread running submitted calls one at a time, in submission order."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.get_running_loop()
        self._calls: queue.SimpleQueue[list[_Call] | None] = queue.SimpleQueue()
        self._results: collections.deque[tuple[asyncio.Future[Any], bool, Any]] = (
            collections.deque()
        )
        self._lock = threading.Lock()
        self._wake_pending = False
        self._batch: collections.deque[_Call] = collections.deque()  # taken, not yet run
        self._abandoned = False
        # the call running now: (its future, whether it is bounded, monotonic start)
        self.running: tuple[asyncio.Future[Any], bool, float] | None = None
        self._bounded: set[int] = set()  # id() of the futures of bounded calls
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def submit(self, function: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Queue ``function(*args)``; the future completes with its result or exception."""
        future: asyncio.Future[Any] = self._loop.create_future()
        if self._abandoned:  # the thread never takes another call
            future.set_exception(NOT_STARTED)
        else:
            self._calls.put([(function, args, future)])
        return future

    def submit_many(
        self, function: Callable[..., Any], argses: list[tuple[Any, ...]], *, bounded: bool = False
    ) -> list[asyncio.Future[Any]]:
        """Queue ``function(*args)`` for each ``args``, in order; one future per call.

        ``bounded``: these are node calls whose time the worker bounds (DELIV-12)."""
        calls = [(function, args, self._loop.create_future()) for args in argses]
        if bounded:
            with self._lock:
                self._bounded.update(id(future) for _, _, future in calls)
        if self._abandoned:
            for _, _, future in calls:
                future.set_exception(NOT_STARTED)
        else:
            self._calls.put(calls)
        return [future for _, _, future in calls]

    def running_for(self) -> tuple[float, bool]:
        """How long the call running now has run, and whether it is bounded ((0, False)
        when the thread is idle)."""
        running = self.running
        if running is None:
            return 0.0, False
        return time.monotonic() - running[2], running[1]

    @property
    def abandoned(self) -> bool:
        return self._abandoned

    def abandon(self, reason: BaseException) -> None:
        """On the event loop: give up on the call running now (its future fails with
        ``reason``) and on every call queued behind it (handed back as not started)."""
        with self._lock:
            self._abandoned = True
            stuck = self.running
            queued = list(self._batch)
            self._batch.clear()
        while True:
            try:
                batch = self._calls.get_nowait()
            except queue.Empty:
                break
            if batch is not None:
                queued += batch
        if stuck is not None and not stuck[0].done():
            stuck[0].set_exception(reason)
        for _, _, future in queued:
            if not future.done():
                future.set_exception(NOT_STARTED)
                future.exception()  # awaited or not: never logged as unretrieved

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """Run ``function(*args)`` on the node thread and wait for it."""
        return await self.submit(function, *args)

    def close(self) -> None:
        """Let the thread end after the calls already queued (it is a daemon either way)."""
        self._calls.put(None)

    def _serve(self) -> None:
        while True:
            batch = self._calls.get()
            if batch is None:
                return
            with self._lock:
                self._batch.extend(batch)
            while True:
                with self._lock:
                    if self._abandoned:
                        return  # abandon() handed the rest back
                    if not self._batch:
                        break
                    call = self._batch.popleft()
                    bounded = id(call[2]) in self._bounded
                    self._bounded.discard(id(call[2]))
                    self.running = (call[2], bounded, time.monotonic())
                if not self._run(*call):
                    return

    def _run(self, function: Callable[..., Any], args: tuple[Any, ...], future: Any) -> bool:
        """Run one call and hand its outcome back; False once the loop is gone."""
        try:
            outcome: tuple[bool, Any] = (True, function(*args))
        except StopIteration as exc:  # a future refuses StopIteration itself
            outcome = (False, RuntimeError(f"node raised StopIteration: {exc!r}"))
        except BaseException as exc:  # handed to the awaiting coroutine, never lost
            outcome = (False, exc)
        with self._lock:
            self.running = None
            self._results.append((future, *outcome))
            if self._wake_pending:
                return True
            self._wake_pending = True
        try:
            self._loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            return False
        return True

    def _deliver(self) -> None:
        with self._lock:
            ready = list(self._results)
            self._results.clear()
            self._wake_pending = False
        for future, ok, value in ready:
            if future.done():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
