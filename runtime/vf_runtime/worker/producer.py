"""The producer loop: mint ids, publish each item, end with an end-of-stream marker.

Ids are ``{node}:{epoch}:{n}``. The epoch is drawn when the process starts, so a
restarted live source never re-uses an id its previous life published (which the
stream's de-duplication would silently drop). A producer class that sets
``replayable = True`` re-emits the same items after a restart and gets stable
ids ``{node}:{n}`` instead, so the re-emitted items are de-duplicated.

``next()`` runs on the node thread. Under BATCH the thread reads a few items
ahead of the publisher, so producing and publishing overlap; under REALTIME it
reads none ahead (an item produced early is an item that is older when it goes).
Small items are read further ahead, up to ``READ_AHEAD_MAX`` or ``AHEAD_BYTES``
of payload, so one hand-over between the thread and the loop carries many of them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from vf_runtime.broker.topology import PUBLISH_WINDOW
from vf_runtime.nodes import Producer
from vf_runtime.store.blobstore import Stopped
from vf_runtime.worker.health import Metrics
from vf_runtime.worker.nodethread import NodeThread
from vf_runtime.worker.outputs import Prepared, Publisher, Stamp
from vf_runtime.worker.tracing import DROPPED, HANDED_BACK, OK, ItemSpan, Tracer

log = logging.getLogger("vf.worker")
READ_AHEAD = 8  # BATCH items a source may produce before the publisher takes them
READ_AHEAD_MAX = 32  # the most, when its items are small
AHEAD_BYTES = 1024 * 1024  # the payload bytes read ahead beyond READ_AHEAD items
SMOOTHING = 0.2
# an output in flight: its encoding, the stream's ack to come and its span (when traced)
Sent = tuple[Prepared, asyncio.Future[bool], ItemSpan | None]


class ProducerLoop:
    """Runs ``next()`` until the source ends or a stop arrives."""

    def __init__(
        self,
        node: Producer,
        *,
        name: str,
        publisher: Publisher | None,
        metrics: Metrics,
        thread: NodeThread,
        tracer: Tracer | None = None,
    ) -> None:
        self.node = node
        self.tracer = tracer
        self.publisher = publisher
        self.metrics = metrics
        self.thread = thread
        replayable = bool(getattr(node, "replayable", False))
        self.prefix = name if replayable else f"{name}:{secrets.token_hex(6)}"
        self.count = 0
        self.item_bytes: float | None = None  # a moving mean of the payload sizes
        self._ended = False  # read and written on the node thread only

    @property
    def ended(self) -> bool:
        """Whether the source itself ended (read once the loop is over)."""
        return self._ended

    def _next(self, stopped: Callable[[], bool]) -> tuple[bool, Any, float]:
        """On the node thread: one ``next()``, unless the source ended or a stop came."""
        if self._ended or stopped():
            return False, None, 0.0
        started = time.perf_counter()
        try:
            item = self.node.next()
        except StopIteration:
            self._ended = True
            return False, None, 0.0
        except BaseException:
            self._ended = True
            raise
        return True, item, time.perf_counter() - started

    async def run(self, stop: asyncio.Event, *, beat: Callable[[], None], ahead: int) -> None:
        """Publish every item (``ahead``: items read in advance); the caller ends the stream."""
        sent: collections.deque[Sent] = collections.deque()
        try:
            await self._loop(stop, beat=beat, sent=sent, ahead=max(ahead, 1))
        except Stopped:  # an output held back (or its payload's offload) when the stop came
            pass
        finally:
            # every output in flight is settled: its ack counted, or given up when stopped
            while sent and self.publisher is not None:
                with contextlib.suppress(Stopped):
                    await self._confirm(self.publisher, *sent.popleft())
        if stop.is_set():
            log.info("stopped after %d items, before the source ended", self.count)
        else:
            log.info("source ended after %d items", self.count)

    async def _loop(
        self,
        stop: asyncio.Event,
        *,
        beat: Callable[[], None],
        sent: collections.deque[Sent],
        ahead: int,
    ) -> None:
        thread, args, limit = self.thread, (stop.is_set,), ahead
        pending = collections.deque(thread.submit_many(self._next, [args] * limit, bounded=True))
        while pending:
            beat()
            more, item, elapsed = await pending.popleft()
            if not more:
                return  # the calls still queued find the same flag and return at once
            if len(pending) <= limit // 2:  # refill in bursts: one wake-up of the thread each
                more_calls = [args] * (limit - len(pending))
                pending.extend(thread.submit_many(self._next, more_calls, bounded=True))
            self.count += 1
            self.metrics.bump("processed")
            self.metrics.observe(elapsed)
            if self.publisher is None:
                continue
            trace_id = f"{self.prefix}:{self.count}"
            span = None
            if self.tracer is not None:
                span = self.tracer.emitted(item=trace_id, seconds=elapsed)
            stamp = Stamp(
                trace_id=trace_id,
                seq=self.count,
                event_ts=time.time(),
                metadata={"proctime": elapsed},
                context=None if span is None else span.headers,
            )
            prepared = await self.publisher.prepare(item, stamp)
            if ahead > 1:
                limit = self._ahead(prepared.size, floor=ahead)
            sent.append((prepared, await self.publisher.submit(prepared), span))
            # confirm in order: at most a window unconfirmed, and whatever is already back
            while sent and (len(sent) >= PUBLISH_WINDOW or sent[0][1].done()):
                await self._confirm(self.publisher, *sent.popleft())

    @staticmethod
    async def _confirm(
        publisher: Publisher,
        prepared: Prepared,
        future: asyncio.Future[bool],
        span: ItemSpan | None,
    ) -> None:
        """Confirm one output; its span, when traced, ends with the outcome."""
        if span is None or not span.live:
            await publisher.confirm(prepared, future)
            return
        try:
            stored = await publisher.confirm(prepared, future)
        except BaseException:
            span.end(HANDED_BACK)
            raise
        span.end(OK if stored else DROPPED)

    def _ahead(self, size: int, *, floor: int) -> int:
        """How many items to read ahead: ``floor``, more while items are small."""
        last = self.item_bytes
        mean = size if last is None else last + SMOOTHING * (size - last)
        self.item_bytes = mean
        return min(READ_AHEAD_MAX, max(floor, int(AHEAD_BYTES // max(mean, 1.0))))
