"""How a replica settles what it received: acks with blob release, retries, dead letters.

A failed group is nak'ed with backoff until its delivery budget is spent and then
dead-lettered with its reason; a poison one is dead-lettered at once; nothing is
dropped without a record (DELIV-1…8). Join groups that cannot complete are
dropped or dead-lettered as their policy says (JOIN-4, JOIN-6).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from vf_runtime.store.blobstore import (
    BlobStore,
    Stopped,
    StoreFull,
    StoreUnavailable,
    patiently,
)
from vf_runtime.worker.assembler import Group
from vf_runtime.worker.config import WorkerConfig
from vf_runtime.worker.health import Metrics
from vf_runtime.worker.inputs import Delivery, Inputs
from vf_runtime.worker.outputs import DeadLetters
from vf_runtime.worker.tracing import (
    DEAD_LETTERED,
    HANDED_BACK,
    RETRIED,
    Tracer,
    end_spans,
    start_spans,
)

log = logging.getLogger("vf.worker")
T = TypeVar("T")


class Settler:
    """Acks, naks, terminations and dead letters of one replica's inputs."""

    def __init__(
        self,
        config: WorkerConfig,
        *,
        inputs: Inputs,
        dlq: DeadLetters,
        blobs: BlobStore | None,
        metrics: Metrics,
    ) -> None:
        self.config = config
        self.inputs = inputs
        self.dlq = dlq
        self.blobs = blobs
        self.metrics = metrics
        self.stopping: Callable[[], bool] = lambda: False
        self.releasing: set[asyncio.Task[None]] = set()
        self.tracer: Tracer | None = None  # set when traces are exported (tracing.py)

    async def finish(self, group: list[Delivery]) -> None:
        """Ack every input of a group that went through, then release its blobs."""
        await self.finish_many([group])

    async def finish_many(self, groups: list[list[Delivery]]) -> None:
        """Ack every input of groups that went through in one write, then release blobs."""
        await self.inputs.ack_many([delivery.msg for group in groups for delivery in group])
        for group in groups:
            for delivery in group:
                self.release(delivery)

    def release(self, delivery: Delivery) -> None:
        """The reader's blob obligation ends with its successful ack, never earlier.

        The release runs in the background (nothing waits on it but :meth:`drain`),
        so bookkeeping in the store overlaps the next message.
        """
        if delivery.blob_ref is None or self.blobs is None:
            return
        task = asyncio.create_task(self._release(self.blobs, delivery.blob_ref, delivery.reader))
        self.releasing.add(task)
        task.add_done_callback(self.releasing.discard)

    async def store(self, operation: Callable[[], Awaitable[T]], *, what: str) -> T:
        """Run a payload-store operation, retrying while the store is away, until a stop."""
        return await patiently(
            operation,
            what=what,
            stopping=self.stopping,
            on_retry=self.store_retry,
            full_patience=self.config.store_full_seconds,
        )

    async def _release(self, blobs: BlobStore, ref: str, reader: str) -> None:
        try:
            await self.store(lambda: blobs.release(ref, reader=reader), what="release")
        except (Stopped, StoreUnavailable, StoreFull) as exc:  # the TTL reclaims it
            log.warning("could not release %s: %s", ref, exc)
        except Exception as exc:  # the key is not a blob's (a forged reference): its ack stands
            log.error("could not release %s: %s", ref, exc)

    async def drain(self) -> None:
        """Wait for the releases still running (before the worker exits)."""
        while self.releasing:
            await asyncio.gather(*self.releasing, return_exceptions=True)

    def store_retry(self) -> None:
        self.metrics.retried("store")
        self.metrics.beat()

    async def fail(self, group: list[Delivery], exc: BaseException) -> bool:
        """Retry with backoff within the budget, then dead-letter; True for worker_fatal."""
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
            end_spans(group, HANDED_BACK)
            return True
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
        end_spans(group, RETRIED)  # unless a dead letter ended the group's span first
        return False

    async def incomplete(self, group: Group[Delivery], *, at_end: bool = False) -> None:
        """A join group that will not complete: dropped, or dead-lettered so nothing vanishes."""
        missing = sorted(set(self.config.parents) - set(group.items))
        if self.config.join_policy.missing == "drop":
            for delivery in group.items.values():
                await self.inputs.settle(delivery.msg, action="ack")
                self.release(delivery)
                self.metrics.bump("skipped")
            return
        reason = f"join group {group.trace_id} never got {', '.join(missing)}"
        reason += " before end of stream" if at_end else ""
        await self.dead_letter(list(group.items.values()), code="VF_JOIN_INCOMPLETE", reason=reason)

    async def dead_letter(
        self, group: list[Delivery], *, code: str, reason: str, disposition: str = "poison"
    ) -> None:
        """Copy to the DLQ, then terminate; if the DLQ refuses, nak so nothing is lost.

        Traced, each dead letter ends a span: its group's, or one of its own for a message
        refused before it reached the node (undecodable, foreign, an incomplete join).
        """
        for delivery in group:
            if self.tracer is not None and delivery.span is None:
                start_spans(self.tracer, [[delivery]])
            if await self.dlq.send(delivery.msg, code=code, reason=reason, disposition=disposition):
                await self.inputs.settle(delivery.msg, action="term")
                end_spans([delivery], DEAD_LETTERED, code=code)
            else:
                await self.inputs.settle(delivery.msg, action="nak", delay=5.0)
                end_spans([delivery], RETRIED)
