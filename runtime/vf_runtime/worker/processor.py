"""The processor and consumer loop: receive, group, call the node, publish, then ack.

Each wake-up takes every delivery that has arrived (up to a window's worth),
settles or groups them, and hands the complete groups to the node thread as one
batch, in arrival order (see :mod:`vf_runtime.worker.groups`); while the node works on
one batch, earlier ones are published and acked, within a bounded window of
outputs in flight. Nothing is acked before its output was published (DELIV-1).
An idempotent consumer takes one group at a time, so whatever it applied is
recorded before it applies the next (IDEM-1). The loop ends when every parent
replica's terminator was seen and every input has drained, or at once on a
control stop.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vf_runtime.broker.topology import PUBLISH_WINDOW
from vf_runtime.store.blobstore import (
    AppliedLog,
    BlobStore,
    PayloadMissing,
    PayloadUnreadable,
    Stopped,
)
from vf_runtime.wire import BLOB_REF, DATA, BlobRef, Envelope, WireError, decode_payload
from vf_runtime.worker.assembler import TraceAssembler
from vf_runtime.worker.config import WorkerConfig
from vf_runtime.worker.eos import EndOfStream
from vf_runtime.worker.groups import Group, GroupRunner
from vf_runtime.worker.health import Metrics
from vf_runtime.worker.inputs import Delivery, Inputs, owns, partition_key
from vf_runtime.worker.nodethread import NodeThread
from vf_runtime.worker.outputs import Publisher
from vf_runtime.worker.settle import Settler
from vf_runtime.worker.window import Window

log = logging.getLogger("vf.worker")
IDLE_WAIT = 0.2
EOS_POLL = 0.25


def _numpy_available() -> bool:
    """Whether numpy is installed, without importing it: a worker that never receives a
    tensor is spared its 10 MiB and 0.1 s; the first tensor to decode imports it."""
    return importlib.util.find_spec("numpy") is not None


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
        keyed: bool = False,
        config: WorkerConfig,
        wiring: Wiring,
        thread: NodeThread,
        metrics: Metrics,
    ) -> None:
        self.config = config
        self.inputs = wiring.inputs
        self.settler = wiring.settler
        self.blobs, self.applied = wiring.blobs, wiring.applied
        self.metrics = metrics
        self.arrays = _numpy_available()
        self.assembler: TraceAssembler[Delivery] | None = (
            TraceAssembler(config.parents, config.join_policy) if len(config.parents) > 1 else None
        )
        self.runner = GroupRunner(
            call,
            keyed=keyed,
            thread=thread,
            inputs=wiring.inputs,
            settler=wiring.settler,
            publisher=wiring.publisher,
            applied=wiring.applied,
            metrics=metrics,
        )
        self.window = Window(1 if self.applied is not None else PUBLISH_WINDOW)
        self.stop = asyncio.Event()

    @property
    def fatal(self) -> bool:
        """A group failed with disposition ``worker_fatal``, or the breaker opened: the
        worker exits with failure; or a node call ran past its bound (DELIV-12); or the
        dead-letter stream is full (DELIV-13)."""
        return self.runner.fatal or self.runner.hung or self.settler.dlq.full is not None

    async def run(self, stop: asyncio.Event, eos: EndOfStream) -> bool:
        """Loop until drained (True) or stopped (False); in-flight groups finish first."""
        self.stop = stop
        self.settler.stopping = stop.is_set
        self.runner.stopping = stop.is_set
        eos.stopping = stop.is_set
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
            deliveries = await self._next_deliveries()
            if deliveries:
                try:
                    await self.process(await self._take(deliveries))
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
                    await self.inputs.confirm_tallies()
                    return True
                if eos.mismatched and await self.drained():
                    eos.check_mismatch()
        return False

    async def _next_deliveries(self) -> list[Delivery]:
        """Whatever has arrived, up to a window's worth; only an empty queue waits (bounded)."""
        queue = self.inputs.queue
        if queue.empty():
            try:
                async with asyncio.timeout(IDLE_WAIT):  # no task of its own, unlike wait_for
                    first = await queue.get()
            except TimeoutError:
                return []
            batch = [first]
        else:
            batch = []
        limit = 1 if self.applied is not None else PUBLISH_WINDOW
        while len(batch) < limit and not queue.empty():
            batch.append(queue.get_nowait())
        return batch

    async def _take(self, deliveries: list[Delivery]) -> list[Group]:
        """Settle or group each delivery; the groups that are complete, in arrival order."""
        groups: list[Group] = []
        for delivery in deliveries:
            complete = await self.handle(delivery)
            if not complete:
                self.inputs.done()  # settled or parked: it leaves the backlog now
            groups += complete
        return groups

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

    async def handle(self, delivery: Delivery) -> list[Group]:
        """Take one delivery; the groups it completed, for the node (each ends one backlog)."""
        if delivery.error is not None:
            error = delivery.error
            await self.settler.dead_letter([delivery], code="VF_POISON_DECODE", reason=str(error))
            return []
        if not await self._admitted(delivery):
            return []
        if self.config.partitioned:
            if not await self._owned(delivery):
                return []
        elif not await self._resolve(delivery):
            return []
        if self.assembler is None:
            return [[delivery]]
        return await self._join(delivery, self.assembler)

    async def _admitted(self, delivery: Delivery) -> bool:
        """Data of this run from the parent it came from; anything else is settled here."""
        envelope = delivery.envelope
        assert envelope is not None
        if envelope.type != DATA:
            await self.inputs.settle(delivery.msg, action="ack")
            return False
        foreign = self._foreign(envelope, parent=delivery.parent)
        if foreign is not None:
            await self.settler.dead_letter([delivery], code="VF_FOREIGN_ENVELOPE", reason=foreign)
            return False
        return True

    def _foreign(self, envelope: Envelope, *, parent: str) -> str | None:
        """Why a data envelope on this run's subject is not this run's, or None (WIRE-9)."""
        config = self.config
        if envelope.flow_id == config.flow_id and envelope.run_id == config.run_id:
            if envelope.producer == parent:
                return None
            return f"envelope from {envelope.producer!r} on the subject of {parent!r}"
        return (
            f"envelope of flow {envelope.flow_id!r} run {envelope.run_id!r} on the subject of "
            f"flow {config.flow_id!r} run {config.run_id!r}"
        )

    async def _join(self, delivery: Delivery, assembler: TraceAssembler[Delivery]) -> list[Group]:
        """Add to its join group; the groups that completed, inputs in parent order."""
        assert delivery.envelope is not None
        trace_id = delivery.envelope.trace_id
        outcome = assembler.add(delivery, parent=delivery.parent, trace_id=trace_id)
        for stale in outcome.superseded:
            await self.inputs.settle(stale.msg, action="term")
        for group in outcome.evicted:
            await self.settler.incomplete(group)
        return [[group.items[p] for p in self.config.parents] for group in outcome.complete]

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
                data = await self.settler.store(lambda: blobs.get(ref), what="fetch")
                value = decode_payload(value.inner_payload_type, data, arrays=self.arrays)
        except (WireError, PayloadMissing, PayloadUnreadable) as exc:
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

    async def process(self, groups: list[Group]) -> None:
        """Hand complete groups on as one batch; published, then acked, in the window."""
        if groups:
            await self.window.spawn(self.runner.run(groups), weight=len(groups))
