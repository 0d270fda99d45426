"""The producer loop: mint ids, publish each item, end with an end-of-stream marker.

Ids are ``{node}:{epoch}:{n}``. The epoch is drawn when the process starts, so a
restarted live source never re-uses an id its previous life published (which the
stream's de-duplication would silently drop). A producer class that sets
``replayable = True`` re-emits the same items after a restart and gets stable
ids ``{node}:{n}`` instead, so the re-emitted items are de-duplicated.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import Any

from vf_runtime.health import Metrics
from vf_runtime.nodes import Producer
from vf_runtime.outputs import PUBLISH_WINDOW, Publisher, Stamp, Window

log = logging.getLogger("vf.worker")


def _next_item(node: Producer) -> tuple[bool, Any]:
    # StopIteration cannot cross a thread boundary into a future, so it becomes a flag.
    try:
        return True, node.next()
    except StopIteration:
        return False, None


class ProducerLoop:
    """Runs ``next()`` until the source ends or a stop arrives."""

    def __init__(
        self, node: Producer, *, name: str, publisher: Publisher | None, metrics: Metrics
    ) -> None:
        self.node = node
        self.publisher = publisher
        self.metrics = metrics
        replayable = bool(getattr(node, "replayable", False))
        self.prefix = name if replayable else f"{name}:{secrets.token_hex(6)}"
        self.count = 0

    async def run(self, stop: asyncio.Event, *, beat: Any) -> None:
        """Publish every item; the caller publishes the terminator afterwards."""
        window = Window(PUBLISH_WINDOW)
        try:
            await self._loop(stop, beat=beat, window=window)
        finally:
            await window.wait()

    async def _loop(self, stop: asyncio.Event, *, beat: Any, window: Window) -> None:
        while not stop.is_set():
            window.check()
            beat()
            started = time.perf_counter()
            more, item = await asyncio.to_thread(_next_item, self.node)
            if not more:
                log.info("source ended after %d items", self.count)
                return
            self.count += 1
            self.metrics.bump("processed")
            if self.publisher is None:
                continue
            stamp = Stamp(
                trace_id=f"{self.prefix}:{self.count}",
                seq=self.count,
                event_ts=time.time(),
                metadata={"proctime": time.perf_counter() - started},
            )
            prepared = await self.publisher.prepare(item, stamp)
            await window.spawn(self.publisher.send(prepared))
        log.info("stopped by the control subject after %d items", self.count)
