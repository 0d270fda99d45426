"""The processor and consumer loop: receive, group, call the node, publish, then ack.

Failures nak with backoff until the delivery budget is spent and then go to the
dead-letter queue with their reason; undecodable messages go there at once. The
loop ends when every parent replica's terminator was seen and every input has
drained, or at once on a control stop.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from vf_runtime.assembler import Group, TraceAssembler
from vf_runtime.blobstore import AppliedLog, BlobStore, PayloadMissing
from vf_runtime.config import WorkerConfig
from vf_runtime.health import Metrics
from vf_runtime.inputs import Delivery, EndOfStream, Inputs, owns, partition_key
from vf_runtime.outputs import (
    PUBLISH_WINDOW,
    DeadLetters,
    Prepared,
    Publisher,
    Stamp,
    Window,
)
from vf_runtime.wire import BLOB_REF, DATA, BlobRef, WireError, decode_payload

log = logging.getLogger("vf.worker")
IDLE_WAIT = 0.2
EOS_POLL = 0.25
ONE_SHOT = "_partition_key"


def _numpy_available() -> bool:
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


class ProcessorLoop:
    """One replica's receive → process → publish → ack loop."""

    def __init__(
        self,
        call: Callable[..., Any],
        *,
        config: WorkerConfig,
        inputs: Inputs,
        outputs: tuple[Publisher | None, DeadLetters],
        stores: tuple[BlobStore | None, AppliedLog | None],
        metrics: Metrics,
    ) -> None:
        self.call = call
        self.config = config
        self.inputs = inputs
        self.publisher, self.dlq = outputs
        self.blobs, self.applied = stores
        self.metrics = metrics
        self.arrays = _numpy_available()
        self.assembler: TraceAssembler[Delivery] | None = (
            TraceAssembler(config.parents, config.join_policy) if len(config.parents) > 1 else None
        )
        self.fatal = False
        self.window = Window(PUBLISH_WINDOW)

    async def run(self, stop: asyncio.Event, eos: EndOfStream) -> bool:
        """Loop until drained (True) or stopped (False); in-flight publishes finish first."""
        try:
            return await self._loop(stop, eos)
        finally:
            await self.window.wait()

    async def _loop(self, stop: asyncio.Event, eos: EndOfStream) -> bool:
        last_poll = 0.0
        while not stop.is_set() and not self.fatal:
            self.metrics.beat()
            delivery = await self._next_delivery()
            if delivery is not None:
                await self.handle(delivery)
                continue
            if self.assembler is not None:
                for group in self.assembler.expire():
                    await self.incomplete(group)
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
                await self.incomplete(group, at_end=True)

    async def handle(self, delivery: Delivery) -> None:
        if delivery.error is not None:
            error = delivery.error
            await self.dead_letter([delivery], code="VF_POISON_DECODE", reason=str(error))
            return
        envelope = delivery.envelope
        assert envelope is not None
        if envelope.type != DATA:
            await self.inputs.settle(delivery.msg, action="ack")
            return
        if self.config.partitioned:
            if not await self._owned(delivery):
                return
        elif not await self._resolve(delivery):
            return
        if self.assembler is None:
            await self.process([delivery])
            return
        outcome = self.assembler.add(delivery, parent=delivery.parent, trace_id=envelope.trace_id)
        for stale in outcome.superseded:
            await self.inputs.settle(stale.msg, action="term")
        for group in outcome.complete:
            await self.process([group.items[p] for p in self.config.parents])
        for group in outcome.evicted:
            await self.incomplete(group)

    async def _resolve(self, delivery: Delivery) -> bool:
        """Decode the payload (fetching an offloaded one); dead-letter it when impossible."""
        envelope = delivery.envelope
        assert envelope is not None
        try:
            payload_type, data = envelope.payload_type, envelope.payload
            value = decode_payload(payload_type, data, arrays=self.arrays)
            if isinstance(value, BlobRef):
                delivery.blob_ref = value.ref
                if self.blobs is None:
                    raise WireError("VF_BLOB_NO_STORE", "payload is offloaded but no store is set")
                data = await self.blobs.get(value.ref)
                value = decode_payload(value.inner_payload_type, data, arrays=self.arrays)
        except (WireError, PayloadMissing) as exc:
            code = getattr(exc, "code", "VF_BLOB_MISSING")
            await self.dead_letter([delivery], code=code, reason=str(exc))
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
            await self.inputs.settle(delivery.msg, action="ack")
            await self.release(delivery)
            self.metrics.bump("skipped")
            return False
        if key is None:
            reason = f"no partition key {config.partition_by!r} in metadata or payload"
            await self.dead_letter([delivery], code="VF_POISON_PARTITION_KEY", reason=reason)
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
        """Call the node on one complete input group; publish, then ack (never before).

        The node runs one group at a time; publishing and acking overlap the next
        group inside a bounded window.
        """
        group_id = self._group_id(group)
        if self.applied is not None and await self.applied.seen(group_id):
            await self._finish(group)
            self.metrics.bump("skipped")
            return
        started = time.perf_counter()
        prepared = None
        try:
            result = await asyncio.to_thread(self.call, *[d.value for d in group])
            elapsed = time.perf_counter() - started
            if self.publisher is not None:
                prepared = await self.publisher.prepare(result, self._stamp(group, elapsed))
        except Exception as exc:
            await self.fail(group, exc)
            return
        await self.window.spawn(
            self._complete(group, prepared=prepared, group_id=group_id, elapsed=elapsed)
        )

    async def _complete(
        self, group: list[Delivery], *, prepared: Prepared | None, group_id: str, elapsed: float
    ) -> None:
        try:
            if self.publisher is not None and prepared is not None:
                await self.publisher.send(prepared)
        except Exception as exc:
            await self.fail(group, exc)
            return
        if self.applied is not None:
            await self.applied.mark(group_id)
        await self._finish(group)
        self.metrics.bump("processed")
        self.metrics.observe(elapsed)

    async def _finish(self, group: list[Delivery]) -> None:
        for delivery in group:
            await self.inputs.settle(delivery.msg, action="ack")
            await self.release(delivery)

    async def release(self, delivery: Delivery) -> None:
        """The reader's blob obligation ends with its successful ack, never earlier."""
        if delivery.blob_ref is not None and self.blobs is not None:
            try:
                await self.blobs.release(delivery.blob_ref, reader=delivery.reader)
            except Exception as exc:  # the TTL reclaims it
                log.warning("could not release %s: %s", delivery.blob_ref, exc)

    async def fail(self, group: list[Delivery], exc: Exception) -> None:
        """Retry with backoff within the budget, then dead-letter; worker_fatal stops us."""
        self.metrics.bump("failed")
        disposition = str(
            self.config.delivery.on_error or getattr(exc, "disposition", None) or "transient"
        )
        code = str(getattr(exc, "code", None) or f"VF_NODE_{type(exc).__name__.upper()}")
        reason = f"{type(exc).__name__}: {exc}"
        log.error("node failed (%s, %s): %s", code, disposition, reason, exc_info=exc)
        if disposition == "worker_fatal":
            for delivery in group:
                await self.inputs.settle(delivery.msg, action="nak")
            self.fatal = True
            return
        budget = self.config.delivery.max_deliver
        for delivery in group:
            attempts = delivery.msg.metadata.num_delivered
            if disposition == "poison" or attempts >= budget:
                await self.dead_letter(
                    [delivery], code=code, reason=reason, disposition=disposition
                )
            else:
                delay = min(2 ** max(1, attempts), self.config.retry_delay_cap)
                await self.inputs.settle(
                    delivery.msg, action="nak", delay=delay * random.uniform(0.5, 1.5)
                )

    async def incomplete(self, group: Group[Delivery], *, at_end: bool = False) -> None:
        """A join group that will not complete: dropped, or dead-lettered so nothing vanishes."""
        missing = sorted(set(self.config.parents) - set(group.items))
        if self.config.join_policy.missing == "drop":
            for delivery in group.items.values():
                await self.inputs.settle(delivery.msg, action="ack")
                await self.release(delivery)
                self.metrics.bump("skipped")
            return
        reason = f"join group {group.trace_id} never got {', '.join(missing)}"
        reason += " before end of stream" if at_end else ""
        await self.dead_letter(list(group.items.values()), code="VF_JOIN_INCOMPLETE", reason=reason)

    async def dead_letter(
        self, group: list[Delivery], *, code: str, reason: str, disposition: str = "poison"
    ) -> None:
        """Copy to the DLQ, then terminate; if the DLQ refuses, nak so nothing is lost."""
        for delivery in group:
            if await self.dlq.send(delivery.msg, code=code, reason=reason, disposition=disposition):
                await self.inputs.settle(delivery.msg, action="term")
            else:
                await self.inputs.settle(delivery.msg, action="nak", delay=5.0)
