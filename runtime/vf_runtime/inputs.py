"""The receiving side of a worker: pull loops per parent, ownership and end of stream.

Each parent is read through this replica's durable (shared by competing replicas,
one per replica when partitioned). Fetched messages stay un-acked until the
worker finishes with them; a keepalive extends their lease meanwhile.

How much a replica fetches ahead follows how long its node takes: about
``HOLD_SECONDS`` of work, between 1 and ``PREFETCH`` messages, so a fast node
gets large batches and a slow one does not hoard what its siblings could take.
REALTIME keeps no local backlog at all: what waits here is not the freshest any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
from dataclasses import dataclass
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from vf_runtime.broker import ensure_consumer, ensure_stream
from vf_runtime.config import WorkerConfig
from vf_runtime.constants import BATCH
from vf_runtime.health import Metrics
from vf_runtime.protocol import publish_empty
from vf_runtime.pull import PullFeed
from vf_runtime.topology import (
    PREFETCH,
    ReaderSpec,
    credit,
    data_consumer_config,
    stream_config,
)
from vf_runtime.wire import EOS, Envelope, WireError, decode_envelope

log = logging.getLogger("vf.worker")
HOLD_SECONDS = 0.1
SMOOTHING = 0.2


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
    """Continuous pulls feeding one queue, and the durables behind them."""

    def __init__(self, client: Client, *, config: WorkerConfig, metrics: Metrics) -> None:
        self.client = client
        self.js = client.jetstream(timeout=10)
        self.config = config
        self.metrics = metrics
        self.names = config.names
        partition = config.replica_id if config.partitioned else None
        self.durables = {
            p: self.names.durable(config.node_name, parent=p, partition=partition)
            for p in config.parents
        }
        self.realtime = config.flow_type != BATCH
        # bounded by the backlog rule below, not by the queue
        self.queue: asyncio.Queue[Delivery] = asyncio.Queue()
        self.backlog = 0  # received and not yet through the node (or settled without it)
        self.wakers: list[asyncio.Future[None]] = []  # pull loops waiting for room
        self.node_seconds: float | None = None
        self.held: dict[int, Msg] = {}  # by id(): nats messages are unhashable
        self.feeds: list[PullFeed] = []
        self.tasks: list[asyncio.Task[None]] = []

    def target(self) -> int:
        """How many messages this replica may hold ahead of its node."""
        if self.realtime or self.node_seconds is None:
            return 1
        return max(1, min(PREFETCH, int(HOLD_SECONDS / max(self.node_seconds, 1e-6))))

    def observe(self, seconds: float) -> None:
        """Learn the node's pace from one call (an exponentially weighted mean)."""
        last = self.node_seconds
        self.node_seconds = seconds if last is None else last + SMOOTHING * (seconds - last)

    def _free(self, feed: PullFeed) -> int:
        return self.target() - self.backlog - feed.requested

    def reconnected(self) -> None:
        """Pull requests do not survive a broker restart: ask again at once."""
        for feed in self.feeds:
            feed.requested = 0
        self.wake()

    def done(self) -> None:
        """One message left the backlog: handed through the node, parked or settled."""
        self.backlog -= 1
        if self.wakers:
            target = self.target()
            if any(self._free(feed) >= max(1, target // 2) for feed in self.feeds):
                self.wake()

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
        """Ensure this replica's durables exist, then start one continuous pull per parent."""
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
            feed = PullFeed(
                self.client,
                stream=stream,
                durable=self.durables[parent],
                deliver=functools.partial(self._received, parent, self.durables[parent]),
                changed=self.wake,
            )
            await feed.start()
            self.feeds.append(feed)
            task = asyncio.create_task(self._pull(feed))
            task.add_done_callback(_report_crash)
            self.tasks.append(task)

    def _received(self, parent: str, reader: str, msg: Msg) -> None:
        self.backlog += 1
        self.metrics.bump("received")
        if _redelivered(msg):
            self.metrics.bump("redelivered")
        self.held[id(msg)] = msg
        self.queue.put_nowait(_decode(msg, parent=parent, reader=reader))

    async def _pull(self, feed: PullFeed) -> None:
        """Keep requests outstanding for the room this replica has."""
        while True:
            target = self.target()
            free = self._free(feed)
            if free >= max(1, target // 2) and feed.ready():
                try:
                    await feed.request(free)
                except Exception as exc:  # closed or reconnecting: try again shortly
                    log.warning("pull request on %s failed, retrying: %s", feed.durable, exc)
                    await asyncio.sleep(0.5)
                continue
            feed.check()
            await self._nap(feed.wait_hint())

    async def _nap(self, seconds: float) -> None:
        """Sleep until there may be room (``done``, a request ended) or ``seconds`` passed."""
        loop = asyncio.get_running_loop()
        waker: asyncio.Future[None] = loop.create_future()
        self.wakers.append(waker)
        timer = loop.call_later(seconds, _wake, waker)
        try:
            await waker
        finally:
            timer.cancel()
            with contextlib.suppress(ValueError):
                self.wakers.remove(waker)

    def wake(self) -> None:
        """There may be room to ask the broker for more (each waiting loop is woken once)."""
        wakers, self.wakers = self.wakers, []
        for waker in wakers:
            _wake(waker)

    async def stop(self) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for feed in self.feeds:
            with contextlib.suppress(Exception):
                await feed.stop()

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

    async def ack_many(self, msgs: list[Msg]) -> None:
        """Ack ``msgs`` in one write and stop keeping them alive."""
        held = self.held
        for msg in msgs:
            held.pop(id(msg), None)
        await publish_empty(self.client, [msg.reply for msg in msgs])

    async def keepalive(self) -> None:
        """Extend the lease of every held message (DELIV-3)."""
        for msg in list(self.held.values()):
            with contextlib.suppress(Exception):
                await msg.in_progress()

    async def consumed_before(self) -> bool:
        """Whether an earlier life of this replica already read and settled every input:
        its durables exist, delivered something, and hold nothing undelivered or un-acked.

        Only meaningful for a durable this replica owns (one replica, or partitioned).
        """
        for parent in self.config.parents:
            try:
                info = await self.js.consumer_info(self.names.stream(parent), self.durables[parent])
            except Exception:
                return False
            delivered = info.delivered.consumer_seq if info.delivered is not None else 0
            if not delivered or info.num_pending or info.num_ack_pending:
                return False
        return True

    async def outstanding(self, parent: str) -> tuple[int, int] | None:
        """(undelivered, un-acked) of this replica's durable; None when unobservable."""
        try:
            info = await self.js.consumer_info(self.names.stream(parent), self.durables[parent])
        except Exception:
            return None
        return info.num_pending or 0, info.num_ack_pending or 0


def _wake(waker: asyncio.Future[None]) -> None:
    if not waker.done():
        waker.set_result(None)


def _report_crash(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("pull loop crashed", exc_info=task.exception())


def _redelivered(msg: Msg) -> bool:
    """Whether the broker delivered ``msg`` before: its ack subject counts deliveries.

    The nine-token ``$JS.ACK.<stream>.<consumer>.<delivered>.…`` subject is read
    directly; other forms (with a domain and account) go through nats-py's parser.
    """
    reply = msg.reply
    if reply.count(".") == 8 and reply.startswith("$JS.ACK."):
        return reply.rsplit(".", 5)[1] != "1"
    return msg.metadata.num_delivered > 1


def _decode(msg: Msg, *, parent: str, reader: str) -> Delivery:
    try:
        return Delivery(parent, reader, msg, decode_envelope(msg.data), None)
    except WireError as exc:
        return Delivery(parent, reader, msg, None, exc)


class EndOfStream:
    """Which parent replicas have published their terminator; read from the streams."""

    def __init__(self, js: JetStreamContext, *, config: WorkerConfig) -> None:
        self.js = js
        self.names = config.names
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
