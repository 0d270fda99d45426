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
from typing import TYPE_CHECKING, Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from vf_runtime.broker.client import delivered_before, ensure_consumer
from vf_runtime.broker.protocol import publish_empty
from vf_runtime.broker.pull import PullFeed
from vf_runtime.broker.streams import ensure_stream
from vf_runtime.broker.topology import (
    PREFETCH,
    ReaderSpec,
    credit,
    data_consumer_config,
    stream_config,
)
from vf_runtime.constants import BATCH
from vf_runtime.wire import DATA, Envelope, WireError, decode_envelope
from vf_runtime.worker.config import WorkerConfig
from vf_runtime.worker.health import Metrics
from vf_runtime.worker.outputs import LIFE_HEADER
from vf_runtime.worker.tally import Doubt, Pooled, Received, SharedTally, judge

if TYPE_CHECKING:
    from vf_runtime.worker.tracing import ItemSpan

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
    span: ItemSpan | None = None  # its group's span, while traced (tracing.py)


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
        # EOS-6: a BATCH replica counts what each parent replica sent it (stream sequences
        # by publisher life), to check their markers' counts; competing replicas pool
        # their counts (EOS-8)
        self.counting = config.flow_type == BATCH
        shared = config.nb_tasks > 1 and not config.partitioned
        self.pool = (
            SharedTally(
                self.js,
                names=self.names,
                child=config.node_name,
                replica=config.replica_id,
                replicas=config.nb_tasks,
            )
            if self.counting and shared
            else None
        )
        self.first_life = True  # no earlier life of this replica took from its durables
        self.tally: dict[tuple[str, int], dict[str, set[int]]] = {}

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
                    max_bytes=self.config.stream_max_bytes,
                ),
            )
            await ensure_consumer(
                self.js, stream, data_consumer_config(self.names, self._spec(parent))
            )
            if self.pool is not None:
                if not await self.pool.start(parent):
                    self.first_life = False
            elif self.counting and await self._taken_before(parent):
                self.first_life = False
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

    async def _taken_before(self, parent: str) -> bool:
        return await delivered_before(self.js, self.names.stream(parent), self.durables[parent])

    def holding(self) -> int:
        """How many messages this replica holds, received and not yet settled."""
        return len(self.held)

    def _received(self, parent: str, reader: str, msg: Msg) -> None:
        self.backlog += 1
        metrics = self.metrics
        metrics.bump("received")
        again, pending = delivery_counts(msg)
        if again:
            metrics.bump("redelivered")
        metrics.backlog[(parent, reader)] = pending
        self.held[id(msg)] = msg
        delivery = _decode(msg, parent=parent, reader=reader)
        if self.counting and self._counts(delivery.envelope, parent=parent):
            assert delivery.envelope is not None
            life = (msg.headers or {}).get(LIFE_HEADER, "")
            lives = self.tally.setdefault((parent, delivery.envelope.replica_id), {})
            lives.setdefault(life, set()).add(_stream_seq(msg))
        self.queue.put_nowait(delivery)

    def _counts(self, envelope: Envelope | None, *, parent: str) -> bool:
        """This run's data from ``parent`` (what its markers count; foreign ones are not)."""
        config = self.config
        return (
            envelope is not None
            and envelope.type == DATA
            and envelope.producer == parent
            and envelope.flow_id == config.flow_id
            and envelope.run_id == config.run_id
        )

    async def count_problem(
        self, parent: str, replica: int, *, claimed: int, life: str
    ) -> Doubt | None:
        """Why a marker's count does not match what was received, or None.

        Exact where no earlier life of this replica (or, when competing replicas pool
        their tallies, of any of them) took messages, and the parent replica published
        from the marker's life only. A marker from a life that sent nothing, while
        another life sent data, is what a publisher restarted with nothing left to do
        writes (and what a forger writes): it is taken only after a quiet wait. Other
        restarted publishers count their own life only.
        """
        if not self.counting or not self.first_life:
            return None
        own = self.tally.get((parent, replica), {})
        if self.pool is None:
            return judge(own, claimed=claimed, life=life, who="this replica")
        pooled = await self._pooled(parent)
        if pooled.inexact:
            return None
        if pooled.unreadable:
            received = sum(len(seqs) for seqs in own.values())
            return Doubt("its siblings' counts could not be read yet", True, received)
        lives = pooled.received.get(replica, {})
        return judge(lives, claimed=claimed, life=life, who="its replicas together")

    def _own(self, parent: str) -> Received:
        """What this replica received from each replica of ``parent`` (its own tally)."""
        return {replica: lives for (p, replica), lives in self.tally.items() if p == parent}

    async def confirm_tallies(self) -> None:
        """Before this replica ends: the siblings can read every tally it leaves (EOS-8)."""
        if self.pool is None or not self.first_life:
            return
        for parent in self.config.parents:
            await self.pool.confirm(parent, self._own(parent))

    async def _pooled(self, parent: str) -> Pooled:
        """This replica's tally for ``parent`` published, then every sibling's merged in."""
        assert self.pool is not None
        own = self._own(parent)
        try:
            await self.pool.publish(parent, own)
        except Exception as exc:  # the broker did not take it: the next poll tries again
            log.debug("could not publish the tally for %s: %s", parent, exc)
            return Pooled(unreadable=True)
        return await self.pool.pooled(parent, own)

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
        """End the pulls; hand back what this replica still holds (DELIV-10)."""
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for feed in self.feeds:
            with contextlib.suppress(Exception):
                await feed.stop()
        held, self.held = list(self.held.values()), {}
        for msg in held:  # redelivered now, to a sibling or the next life, not after ack wait
            with contextlib.suppress(Exception):
                await msg.nak()

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


def redelivered(msg: Msg) -> bool:
    """Whether the broker delivered ``msg`` before: its ack subject counts deliveries.

    The nine-token ``$JS.ACK.<stream>.<consumer>.<delivered>.…`` subject is read
    directly; other forms (with a domain and account) go through nats-py's parser.
    """
    reply = msg.reply
    if reply.count(".") == 8 and reply.startswith("$JS.ACK."):
        return reply.rsplit(".", 5)[1] != "1"
    return msg.metadata.num_delivered > 1


def delivery_counts(msg: Msg) -> tuple[bool, int]:
    """Whether ``msg`` was delivered before, and how many messages its durable had not
    delivered yet when it did: both from its ack subject, as :func:`redelivered` reads it
    (``….<delivered>.<stream seq>.<consumer seq>.<timestamp>.<pending>``)."""
    reply = msg.reply
    if reply.count(".") == 8 and reply.startswith("$JS.ACK."):
        tail = reply.rsplit(".", 5)
        return tail[1] != "1", int(tail[5])
    meta = msg.metadata
    return meta.num_delivered > 1, int(meta.num_pending or 0)


def _stream_seq(msg: Msg) -> int:
    """The message's stream sequence, read from its nine-token ack subject when it has one."""
    reply = msg.reply
    if reply.count(".") == 8 and reply.startswith("$JS.ACK."):
        return int(reply.split(".")[5])
    return int(msg.metadata.sequence.stream)


def _decode(msg: Msg, *, parent: str, reader: str) -> Delivery:
    try:
        return Delivery(parent, reader, msg, decode_envelope(msg.data), None)
    except WireError as exc:
        return Delivery(parent, reader, msg, None, exc)
