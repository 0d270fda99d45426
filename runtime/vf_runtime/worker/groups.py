"""Complete input groups through the node: call it, publish each output, then ack the inputs.

A batch of groups goes to the node thread at once. Each result comes back as soon
as its call returns and its output is published right away, so publishing
overlaps the node's next call, and outputs reach the stream in input order. Once
the stream has acknowledged every output of the batch, the batch's inputs are
acked in one write: nothing is acked before its output was stored (DELIV-1). A
failed call or publish settles its own group (retry or dead letter) and leaves
the rest of the batch alone. An idempotent consumer is given one group per batch:
it checks the group was not applied before, and records it as applied before the
ack (IDEM-1).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeGuard

from vf_runtime.store.blobstore import AppliedLog, Stopped, StoreFull, StoreRefused
from vf_runtime.worker.health import Metrics
from vf_runtime.worker.inputs import Delivery, Inputs
from vf_runtime.worker.nodethread import NodeThread, NotStarted
from vf_runtime.worker.outputs import Prepared, Publisher, Stamp
from vf_runtime.worker.settle import Settler
from vf_runtime.worker.tracing import HANDED_BACK, OK, end_spans, start_spans
from vf_runtime.worker.watchdog import NodeHung

ONE_SHOT = "_partition_key"
_NOT_RUN = object()
Group = list[Delivery]


def _timed(
    call: Callable[..., Any], values: list[Any], stopped: Callable[[], bool]
) -> tuple[Any, float]:
    """On the node thread: the node's result and how long it took (not run after a stop)."""
    if stopped():
        return _NOT_RUN, 0.0
    started = time.perf_counter()
    result = call(*values)
    return result, time.perf_counter() - started


class SignatureMismatch(Exception):
    """The node could not even be called with its inputs: retrying cannot help (poison)."""

    code = "VF_NODE_SIGNATURE"
    disposition = "poison"

    def __init__(self, cause: TypeError) -> None:
        super().__init__(f"the node cannot be called with its inputs: {cause}")


def _call_refused(exc: BaseException) -> TypeGuard[TypeError]:
    """Whether ``exc`` is the TypeError of the call itself (wrong number or names of
    arguments), raised before any line of the node ran, rather than one from inside it."""
    if not isinstance(exc, TypeError) or exc.__traceback__ is None:
        return False
    last = exc.__traceback__
    while last.tb_next is not None:
        last = last.tb_next
    return last.tb_frame.f_globals.get("__name__") in _CALL_SITES


_CALL_SITES = ("vf_runtime.worker.groups", "vf_runtime.context")


def stamp(group: Group, elapsed: float) -> Stamp:
    """The output's identity: the first input's trace, the lowest seq, merged metadata."""
    if len(group) == 1 and group[0].envelope is not None:  # no join: one input's identity
        envelope = group[0].envelope
        carried = dict(envelope.metadata)
        carried.pop(ONE_SHOT, None)
        carried["proctime"] = elapsed
        span = group[0].span
        return Stamp(
            trace_id=envelope.trace_id,
            seq=envelope.seq,
            event_ts=envelope.event_ts,
            metadata=carried,
            context=None if span is None else span.headers,
        )
    envelopes = [d.envelope for d in group if d.envelope is not None]
    metadata: dict[str, Any] = {}
    for envelope in reversed(envelopes):
        metadata.update(envelope.metadata)
    metadata.pop(ONE_SHOT, None)
    metadata["proctime"] = elapsed
    times = [e.event_ts for e in envelopes if e.event_ts is not None]
    span = group[0].span if group else None
    return Stamp(
        trace_id=envelopes[0].trace_id,
        seq=min(e.seq for e in envelopes),
        event_ts=min(times) if times else None,
        metadata=metadata,
        context=None if span is None else span.headers,
    )


def _stamped(group: Group) -> float | None:
    """When the group's producer stamped it (``event_ts``): its earliest input's."""
    if len(group) == 1:
        envelope = group[0].envelope
        return None if envelope is None else envelope.event_ts
    times = [d.envelope.event_ts for d in group if d.envelope is not None]
    known = [t for t in times if t is not None]
    return min(known) if known else None


def group_id(group: Group) -> str:
    """What an idempotent consumer records: the message id, or a digest of a join's ids."""
    ids = [d.envelope.message_id for d in group if d.envelope is not None]
    return ids[0] if len(ids) == 1 else hashlib.sha256("|".join(ids).encode()).hexdigest()[:32]


@dataclass
class _Sent:
    """A group the node went through: its output in flight, if it has one."""

    group: Group
    elapsed: float
    output: tuple[Prepared, asyncio.Future[bool]] | None


class GroupRunner:
    """Takes batches of complete groups through the node, the stream and the acks."""

    def __init__(
        self,
        call: Callable[..., Any],
        *,
        keyed: bool = False,
        thread: NodeThread,
        inputs: Inputs,
        settler: Settler,
        publisher: Publisher | None,
        applied: AppliedLog | None,
        metrics: Metrics,
    ) -> None:
        self.call = call
        self.keyed = keyed  # call returns (result, partition key) (vf_runtime.context)
        self.thread = thread
        self.inputs = inputs
        self.settler = settler
        self.publisher = publisher
        self.applied = applied
        self.metrics = metrics
        self.stopping: Callable[[], bool] = lambda: False
        self.fatal = False  # a group failed with disposition worker_fatal, or the breaker opened
        self.breaker = settler.config.breaker_threshold  # 0: never opens
        self.failures = 0  # the node's consecutive failed calls
        self.opened: str | None = None  # why the breaker opened (DELIV-11)
        self.hung = False  # a call ran past its bound (DELIV-12): the replica ends
        self.full: StoreFull | None = None  # the payload store stayed full (BLOB-8)
        self.refused: StoreRefused | None = None  # the store refused this client (BLOB-9)

    async def run(self, groups: list[Group]) -> None:
        """Take ``groups`` through: call the node, publish, confirm, then ack (never before)."""
        if self.applied is not None:
            groups = await self._unapplied(groups)
        tracer = self.settler.tracer
        finished: list[_Sent] = []
        if tracer is None:
            finished = await self._through(groups)
        else:  # each group's span ends here at the latest: what is not settled is handed back
            start_spans(tracer, groups)
            try:
                finished = await self._through(groups)
                for item in finished:
                    end_spans(item.group, OK)
            finally:
                if len(finished) < len(groups):
                    ended = {id(item.group) for item in finished}
                    for group in groups:
                        if id(group) not in ended:
                            end_spans(group, HANDED_BACK)
        metrics = self.metrics
        now = time.time()
        for item in finished:
            metrics.bump("processed")
            metrics.observe(item.elapsed)
            stamped = _stamped(item.group)
            if stamped is not None:
                metrics.arrived(now - stamped)

    async def _through(self, groups: list[Group]) -> list[_Sent]:
        """Call, publish, confirm, then ack; the groups that went all the way."""
        sent = await self._call_all(groups)
        finished = await self._confirm_all(sent)
        await self.settler.finish_many([item.group for item in finished])
        return finished

    async def _unapplied(self, groups: list[Group]) -> list[Group]:
        """Leave out what an idempotent consumer applied already (acked, never re-applied)."""
        applied = self.applied
        assert applied is not None
        fresh: list[Group] = []
        for group in groups:
            key = group_id(group)
            try:
                seen = await self.settler.store(
                    partial(applied.seen, key), what="idempotency check"
                )
            except Stopped:
                self.inputs.done()
                continue  # left un-acked: redelivered to whoever runs next
            if seen:
                self.inputs.done()
                await self.settler.finish(group)
                self.metrics.bump("skipped")
                continue
            fresh.append(group)
        return fresh

    async def _call_all(self, groups: list[Group]) -> list[_Sent]:
        """Run the node on each group and publish each output as soon as it is back."""
        argses = [(self.call, [d.value for d in group], self.stopping) for group in groups]
        futures = self.thread.submit_many(_timed, argses, bounded=True) if argses else []
        sent: list[_Sent] = []
        stopped = False
        for group, future in zip(groups, futures, strict=True):
            try:
                result, elapsed = await future
            except NotStarted:  # behind a call that never returned: handed back unstarted
                self.inputs.done()
                continue
            except NodeHung as exc:  # ran past its bound: it fails, and the replica ends
                self.inputs.done()
                self.hung = True
                await self.settler.fail(group, exc)
                continue
            except Exception as exc:
                self.inputs.done()
                await self._node_failed(group, exc)
                continue
            self.failures = 0
            self.inputs.done()
            if result is _NOT_RUN or stopped:
                continue  # stopped: left un-acked for whoever runs next
            self.inputs.observe(elapsed)
            key = None
            if self.keyed:
                result, key = result
            try:
                output = await self._submit(result, group, elapsed, key)
            except Stopped:
                stopped = True
                continue
            except (StoreFull, StoreRefused) as exc:
                await self._store_full(group, exc)
                continue
            except Exception as exc:
                self.fatal = await self.settler.fail(group, exc) or self.fatal
                continue
            sent.append(_Sent(group, elapsed, output))
        return sent

    async def _node_failed(self, group: Group, exc: Exception) -> None:
        """Settle a failed call; after ``breaker`` failures in a row, hand the group back
        instead and stop this replica: a broken replica must not shred the stream into
        the dead-letter stream while a healthy one (or a fixed rollout) could take it."""
        self.failures += 1
        if not self.breaker or self.failures < self.breaker:
            failure = SignatureMismatch(exc) if _call_refused(exc) else exc
            self.fatal = await self.settler.fail(group, failure) or self.fatal
            return
        self.metrics.bump("failed")
        self.opened = (
            f"{self.failures} calls in a row failed, the last with {type(exc).__name__}: {exc}"
        )
        for delivery in group:
            await self.inputs.settle(delivery.msg, action="nak")
        self.fatal = True

    async def _store_full(self, group: Group, exc: StoreFull | StoreRefused) -> None:
        """The payload store stayed full past its patience (BLOB-8), or refuses this client
        (BLOB-9): not the node's failure. Hand the group back to the broker, unjudged, and
        stop this replica by that name."""
        for delivery in group:
            await self.inputs.settle(delivery.msg, action="nak")
        if isinstance(exc, StoreRefused):
            self.refused = exc
        else:
            self.full = exc
        self.fatal = True

    async def _submit(
        self, result: Any, group: Group, elapsed: float, key: Any = None
    ) -> tuple[Prepared, asyncio.Future[bool]] | None:
        if self.publisher is None:
            return None
        identity = stamp(group, elapsed)
        if key is not None:  # ctx.set_partition_key: this output only
            identity = replace(identity, metadata={**identity.metadata, ONE_SHOT: key})
        prepared = await self.publisher.prepare(result, identity)
        return prepared, await self.publisher.submit(prepared)

    async def _confirm_all(self, sent: list[_Sent]) -> list[_Sent]:
        """Wait for each output's ack in order (and record it when idempotent)."""
        finished: list[_Sent] = []
        for item in sent:
            try:
                if item.output is not None and self.publisher is not None:
                    await self.publisher.confirm(*item.output)
                if self.applied is not None:
                    mark = partial(self.applied.mark, group_id(item.group))
                    await self.settler.store(mark, what="idempotency record")
            except Stopped:
                continue
            except StoreFull as exc:  # only the record writes to the store here
                # applied, but its record cannot be kept: acked all the same, since handing
                # it back would apply it again; the replica stops after this batch (BLOB-8)
                self.full, self.fatal = exc, True
            except StoreRefused as exc:  # as a full store: acked, the replica stops (BLOB-9)
                self.refused, self.fatal = exc, True
            except Exception as exc:
                self.fatal = await self.settler.fail(item.group, exc) or self.fatal
                continue
            finished.append(item)
        return finished
