"""The receiving side of a worker: pull loops per parent, ownership and end of stream.

Each parent is read through this replica's durable (shared by competing replicas,
one per replica when partitioned). Fetched messages stay un-acked until the
worker finishes with them; a keepalive extends their lease meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from dataclasses import dataclass
from typing import Any

from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from vf_runtime.broker import ensure_consumer, ensure_stream
from vf_runtime.config import WorkerConfig
from vf_runtime.constants import BATCH
from vf_runtime.health import Metrics
from vf_runtime.naming import RunNames
from vf_runtime.topology import (
    PREFETCH,
    ReaderSpec,
    credit,
    data_consumer_config,
    stream_config,
)
from vf_runtime.wire import EOS, Envelope, WireError, decode_envelope

log = logging.getLogger("vf.worker")
FETCH_TIMEOUT = 1.0


@dataclass
class Delivery:
    """One fetched message, decoded when it could be."""

    parent: str
    reader: str
    msg: Msg
    envelope: Envelope | None
    error: WireError | None
    value: Any = None
    blob_ref: str | None = None


def owns(key: object, *, replicas: int, replica: int) -> bool:
    """Stable partition ownership: a SHA-256 prefix of the key, modulo the replica count."""
    digest = hashlib.sha256(str(key).encode("utf-8")).hexdigest()
    return int(digest[:8], 16) % replicas == replica


def partition_key(envelope: Envelope, partition_by: str) -> object:
    if partition_by == "trace_id":
        return envelope.trace_id
    return envelope.metadata.get(partition_by)


class Inputs:
    """Pull loops feeding one queue, and the durables behind them."""

    def __init__(self, js: JetStreamContext, *, config: WorkerConfig, metrics: Metrics) -> None:
        self.js = js
        self.config = config
        self.metrics = metrics
        self.names = RunNames(config.flow_id, config.run_id)
        partition = config.replica_id if config.partitioned else None
        self.durables = {
            p: self.names.durable(config.node_name, parent=p, partition=partition)
            for p in config.parents
        }
        # REALTIME keeps no local backlog: what waits here is not the freshest any more.
        self.batch = PREFETCH if config.flow_type == BATCH else 1
        self.queue: asyncio.Queue[Delivery] = asyncio.Queue(maxsize=self.batch * 2)
        self.held: dict[int, Msg] = {}  # by id(): nats messages are unhashable
        self.tasks: list[asyncio.Task[None]] = []

    def _spec(self, parent: str) -> ReaderSpec:
        config = self.config
        return ReaderSpec(
            child=config.node_name,
            parent=parent,
            partition=config.replica_id if config.partitioned else None,
            max_deliver=config.delivery.max_deliver,
            credit=credit(
                replicas=config.nb_tasks,
                partitioned=config.partitioned,
                parents=len(config.parents),
                max_pending=config.join_policy.max_pending,
            ),
            ack_wait=config.ack_wait_seconds,
        )

    async def start(self) -> None:
        """Ensure this replica's durables exist, then start one pull loop per parent."""
        for parent in self.config.parents:
            stream = self.names.stream(parent)
            # the parent may not have started yet: its stream is created here just the same
            await ensure_stream(
                self.js,
                stream_config(
                    self.names,
                    parent,
                    flow_type=self.config.flow_type,
                    replicas=self.config.stream_replicas,
                ),
            )
            await ensure_consumer(
                self.js, stream, data_consumer_config(self.names, self._spec(parent))
            )
            sub = await self.js.pull_subscribe_bind(self.durables[parent], stream=stream)
            task = asyncio.create_task(self._pull(parent, sub))
            task.add_done_callback(_report_crash)
            self.tasks.append(task)

    async def _pull(self, parent: str, sub: JetStreamContext.PullSubscription) -> None:
        reader = self.durables[parent]
        while True:
            try:
                messages = await sub.fetch(batch=self.batch, timeout=FETCH_TIMEOUT)
            except (TimeoutError, NatsTimeout):
                continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("fetch from %s failed, retrying: %s", parent, exc)
                await asyncio.sleep(0.5)
                continue
            for msg in messages:
                self.held[id(msg)] = msg
                self.metrics.bump("received")
                await self.queue.put(_decode(msg, parent=parent, reader=reader))

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def settle(self, msg: Msg, *, action: str, delay: float | None = None) -> None:
        """Ack, term or nak ``msg`` and stop keeping it alive."""
        self.held.pop(id(msg), None)
        try:
            if action == "ack":
                await msg.ack()
            elif action == "term":
                await msg.term()
            else:
                await msg.nak(delay=delay)
        except Exception as exc:  # the lease runs out and the broker redelivers
            log.warning("could not %s a message: %s", action, exc)

    async def keepalive(self) -> None:
        """Extend the lease of every held message (DELIV-3)."""
        for msg in list(self.held.values()):
            with contextlib.suppress(Exception):
                await msg.in_progress()

    async def outstanding(self, parent: str) -> tuple[int, int] | None:
        """(undelivered, un-acked) of this replica's durable; None when unobservable."""
        try:
            info = await self.js.consumer_info(self.names.stream(parent), self.durables[parent])
        except Exception:
            return None
        return info.num_pending or 0, info.num_ack_pending or 0


def _report_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("pull loop crashed", exc_info=task.exception())


def _decode(msg: Msg, *, parent: str, reader: str) -> Delivery:
    try:
        return Delivery(parent, reader, msg, decode_envelope(msg.data), None)
    except WireError as exc:
        return Delivery(parent, reader, msg, None, exc)


class EndOfStream:
    """Which parent replicas have published their terminator; read from the streams."""

    def __init__(self, js: JetStreamContext, *, config: WorkerConfig) -> None:
        self.js = js
        self.names = RunNames(config.flow_id, config.run_id)
        self.missing = {
            (parent, replica)
            for parent in config.parents
            for replica in range(config.parent_replicas.get(parent, 1))
        }
        self.aborted: list[Envelope] = []

    @property
    def done(self) -> bool:
        return not self.missing

    async def poll(self) -> None:
        """Look up the last marker of every parent replica still missing one."""
        for parent, replica in sorted(self.missing):
            stream = self.names.stream(parent)
            subject = self.names.eos_subject(parent, replica=replica)
            try:
                raw = await self.js.get_last_msg(stream, subject)
            except NotFoundError:
                continue
            except Exception as exc:
                log.debug("end-of-stream lookup on %s failed: %s", subject, exc)
                continue
            try:
                envelope = decode_envelope(raw.data or b"")
            except WireError as exc:
                log.error("undecodable terminator on %s ignored: %s", subject, exc)
                continue
            self.missing.discard((parent, replica))
            if envelope.type != EOS:
                self.aborted.append(envelope)
            log.info("end of stream from %s replica %d", parent, replica)
