"""The processor and consumer loop: receive, group, call the node, publish, then ack.

Each complete input group goes to the node thread in arrival order; while the node
works on one group, earlier groups are published and acked, within a bounded
window of groups in flight. Nothing is acked before its output was published
(DELIV-1). An idempotent consumer takes one group at a time, so whatever it
applied is recorded before it applies the next (IDEM-1). The loop ends when every
parent replica's terminator was seen and every input has drained, or at once on
a control stop.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from vf_runtime.assembler import TraceAssembler
from vf_runtime.blobstore import AppliedLog, BlobStore, PayloadMissing, Stopped, patiently
from vf_runtime.config import WorkerConfig
from vf_runtime.health import Metrics
from vf_runtime.inputs import Delivery, EndOfStream, Inputs, owns, partition_key
from vf_runtime.nodethread import NodeThread
from vf_runtime.outputs import Publisher, Stamp, Window
from vf_runtime.settle import Settler
from vf_runtime.topology import PUBLISH_WINDOW
from vf_runtime.wire import BLOB_REF, DATA, BlobRef, WireError, decode_payload

log = logging.getLogger("vf.worker")
IDLE_WAIT = 0.2
EOS_POLL = 0.25
ONE_SHOT = "_partition_key"
T = TypeVar("T")


def _numpy_available() -> bool:
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


_NOT_RUN = object()


def _timed(
    call: Callable[..., Any], values: list[Any], stopped: Callable[[], bool]
) -> tuple[Any, float]:
    """On the node thread: the node's result and how long it took (not run after a stop)."""
    if stopped():
        return _NOT_RUN, 0.0
    started = time.perf_counter()
    result = call(*values)
    return result, time.perf_counter() - started


@dataclass(frozen=True, kw_only=True)
class Wiring:
    """Where a processor loop's inputs come from and its results go."""

    inputs: Inputs
    settler: Settler
    publisher: Publisher | None
    blobs: BlobStore | None
    applied: AppliedLog | None


class ProcessorLoop:
    """One replica's receive → process → publish → ack loop."""

    def __init__(
        self,
        call: Callable[..., Any],
        *,
        config: WorkerConfig,
        wiring: Wiring,
        thread: NodeThread,
        metrics: Metrics,
    ) -> None:
        self.call = call
        self.config = config
        self.inputs = wiring.inputs
        self.settler = wiring.settler
        self.publisher = wiring.publisher
        self.blobs, self.applied = wiring.blobs, wiring.applied
        self.thread = thread
        self.metrics = metrics
        self.arrays = _numpy_available()
        self.assembler: TraceAssembler[Delivery] | None = (
            TraceAssembler(config.parents, config.join_policy) if len(config.parents) > 1 else None
        )
        self.fatal = False
        self.window = Window(1 if self.applied is not None else PUBLISH_WINDOW)
        self.stop = asyncio.Event()

    async def run(self, stop: asyncio.Event, eos: EndOfStream) -> bool:
        """Loop until drained (True) or stopped (False); in-flight groups finish first."""
        self.stop = stop
        self.settler.stopping = stop.is_set
        try:
            return await self._loop(stop, eos)
        finally:
            await self.window.wait()
            await self.settler.drain()

    async def _loop(self, stop: asyncio.Event, eos: EndOfStream) -> bool:
        last_poll = 0.0
        while not stop.is_set() and not self.fatal:
            self.metrics.beat()
            self.window.check()
            delivery = await self._next_delivery()
            if delivery is not None:
                try:
                    if not await self.handle(delivery):
                        self.inputs.done()
                except Stopped:
                    return False
                continue
            if self.assembler is not None:
                for group in self.assembler.expire():
                    await self.settler.incomplete(group)
            if time.monotonic() - last_poll >= EOS_POLL:
                last_poll = time.monotonic()
                await eos.poll()
                if eos.done and await self.drained():
                    await self.flush()
                    return True
        return False

    async def _next_delivery(self) -> Delivery | None:
        # The common busy case takes no timer; only an empty queue waits (bounded).
        try:
            return self.inputs.queue.get_nowait()
        except asyncio.QueueEmpty:
            pass
        try:
            return await asyncio.wait_for(self.inputs.queue.get(), timeout=IDLE_WAIT)
        except TimeoutError:
            return None

    async def drained(self) -> bool:
        """Known from the broker: nothing undelivered, nothing un-acked but what we hold."""
        if not self.inputs.queue.empty() or len(self.window):
            return False
        for parent in self.config.parents:
            counts = await self.inputs.outstanding(parent)
            held = self.assembler.held(parent) if self.assembler is not None else 0
            if counts is None or counts != (0, held):
                return False
        return True

    async def flush(self) -> None:
        if self.assembler is not None:
            for group in self.assembler.take_all():
                await self.settler.incomplete(group, at_end=True)

    async def handle(self, delivery: Delivery) -> bool:
        """Take one delivery; True when it went to the node (which then ends its backlog)."""
        if delivery.error is not None:
            error = delivery.error
            await self.settler.dead_letter([delivery], code="VF_POISON_DECODE", reason=str(error))
            return False
        envelope = delivery.envelope
        assert envelope is not None
        if envelope.type != DATA:
            await self.inputs.settle(delivery.msg, action="ack")
            return False
        if self.config.partitioned:
            if not await self._owned(delivery):
                return False
        elif not await self._resolve(delivery):
            return False
        if self.assembler is None:
            await self.process([delivery])
            return True
        return await self._join(delivery, self.assembler)

    async def _join(self, delivery: Delivery, assembler: TraceAssembler[Delivery]) -> bool:
        """Add to its join group; True when that completed the group (sent to the node)."""
        assert delivery.envelope is not None
        trace_id = delivery.envelope.trace_id
        outcome = assembler.add(delivery, parent=delivery.parent, trace_id=trace_id)
        for stale in outcome.superseded:
            await self.inputs.settle(stale.msg, action="term")
        for group in outcome.evicted:
            await self.settler.incomplete(group)
        for group in outcome.complete:
            await self.process([group.items[p] for p in self.config.parents])
        return bool(outcome.complete)

    async def _store(self, operation: Callable[[], Awaitable[T]], *, what: str) -> T:
        return await patiently(
            operation, what=what, stopping=self.stop.is_set, on_retry=self.settler.store_retry
        )

    async def _resolve(self, delivery: Delivery) -> bool:
        """Decode the payload (fetching an offloaded one); dead-letter it when impossible."""
        envelope = delivery.envelope
        assert envelope is not None
        try:
            payload_type, data = envelope.payload_type, envelope.payload
            value = decode_payload(payload_type, data, arrays=self.arrays)
            if isinstance(value, BlobRef):
                blobs, ref = self.blobs, value.ref
                delivery.blob_ref = ref
                if blobs is None:
                    raise WireError("VF_BLOB_NO_STORE", "payload is offloaded but no store is set")
                data = await self._store(lambda: blobs.get(ref), what="fetch")
                value = decode_payload(value.inner_payload_type, data, arrays=self.arrays)
        except (WireError, PayloadMissing) as exc:
            code = getattr(exc, "code", "VF_BLOB_MISSING")
            await self.settler.dead_letter([delivery], code=code, reason=str(exc))
            return False
        delivery.value = value
        return True

    async def _owned(self, delivery: Delivery) -> bool:
        """Partition ownership, then the payload; a non-owner acks and skips unread.

        The key is the trace id or a metadata field; when the metadata lacks the
        field, a map payload's field of that name is used. A keyless message is poison.
        """
        envelope = delivery.envelope
        assert envelope is not None and self.config.partition_by is not None
        key = partition_key(envelope, self.config.partition_by)
        resolved = False
        if key is None:
            if not await self._resolve(delivery):
                return False
            resolved = True
            if isinstance(delivery.value, dict):
                key = delivery.value.get(self.config.partition_by)
        config = self.config
        if not owns(key, replicas=config.nb_tasks, replica=config.replica_id):
            if envelope.payload_type == BLOB_REF and delivery.blob_ref is None:
                delivery.blob_ref = decode_payload(BLOB_REF, envelope.payload).ref
            await self.settler.finish([delivery])
            self.metrics.bump("skipped")
            return False
        if key is None:
            reason = f"no partition key {config.partition_by!r} in metadata or payload"
            await self.settler.dead_letter(
                [delivery], code="VF_POISON_PARTITION_KEY", reason=reason
            )
            return False
        return resolved or await self._resolve(delivery)

    def _stamp(self, group: list[Delivery], elapsed: float) -> Stamp:
        envelopes = [d.envelope for d in group if d.envelope is not None]
        metadata: dict[str, Any] = {}
        for envelope in reversed(envelopes):
            metadata.update(envelope.metadata)
        metadata.pop(ONE_SHOT, None)
        metadata["proctime"] = elapsed
        times = [e.event_ts for e in envelopes if e.event_ts is not None]
        return Stamp(
            trace_id=envelopes[0].trace_id,
            seq=min(e.seq for e in envelopes),
            event_ts=min(times) if times else None,
            metadata=metadata,
        )

    def _group_id(self, group: list[Delivery]) -> str:
        ids = [d.envelope.message_id for d in group if d.envelope is not None]
        return ids[0] if len(ids) == 1 else hashlib.sha256("|".join(ids).encode()).hexdigest()[:32]

    async def process(self, group: list[Delivery]) -> None:
        """Hand one complete input group on; it is published, then acked, in the window."""
        await self.window.spawn(self._through(group))

    async def _through(self, group: list[Delivery]) -> None:
        """Call the node on one group unless an idempotent consumer applied it already."""
        applied = self.applied
        group_id = self._group_id(group) if applied is not None else ""
        if applied is not None:
            try:
                seen = await self._store(lambda: applied.seen(group_id), what="idempotency check")
            except Stopped:
                self.inputs.done()
                return  # left un-acked: redelivered to whoever runs next
            if seen:
                self.inputs.done()
                await self.settler.finish(group)
                self.metrics.bump("skipped")
                return
        await self._call(group, group_id)

    async def _call(self, group: list[Delivery], group_id: str) -> None:
        """Publish the node's result, record it when idempotent, then ack (never before)."""
        values = [d.value for d in group]
        future = self.thread.submit(_timed, self.call, values, self.stop.is_set)
        try:
            result, elapsed = await future
        except Exception as exc:
            self.inputs.done()
            self.fatal = await self.settler.fail(group, exc) or self.fatal
            return
        self.inputs.done()
        if result is _NOT_RUN:
            return  # stopped: left un-acked for whoever runs next
        self.inputs.observe(elapsed)
        try:
            if self.publisher is not None:
                prepared = await self.publisher.prepare(result, self._stamp(group, elapsed))
                await self.publisher.send(prepared)
            if self.applied is not None:
                applied = self.applied
                await self._store(lambda: applied.mark(group_id), what="idempotency record")
        except Stopped:
            return
        except Exception as exc:
            self.fatal = await self.settler.fail(group, exc) or self.fatal
            return
        await self.settler.finish(group)
        self.metrics.bump("processed")
        self.metrics.observe(elapsed)
