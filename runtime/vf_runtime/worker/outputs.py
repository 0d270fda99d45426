"""The publishing side of a worker: data, end-of-stream markers and dead letters.

Every data envelope carries its message id as ``Nats-Msg-Id`` so a republish after
a crash is de-duplicated by the stream. BATCH publishes wait out a full stream
(backpressure); REALTIME publishes try once and never block the loop.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import secrets
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import (
    ConnectionReconnectingError,
    NoRespondersError,
    OutboundBufferLimitError,
)
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.errors import APIError, NoStreamResponseError

from vf_runtime.broker.jsacks import AckInbox
from vf_runtime.constants import BATCH
from vf_runtime.store.blobstore import BlobStore, Stopped, patiently
from vf_runtime.wire import (
    ABORT,
    EOS,
    BlobRef,
    Envelope,
    ErrorInfo,
    WireError,
    encode_envelope,
    encode_payload,
)
from vf_runtime.wire.codec import data_envelope
from vf_runtime.worker.config import WorkerConfig
from vf_runtime.worker.health import Metrics
from vf_runtime.worker.tracing import TRACEPARENT, TRACESTATE

log = logging.getLogger("vf.worker")
BACKOFF = (0.05, 0.1, 0.2, 0.5, 1.0)
SWEEP_EVERY = 0.5
# Publish failures that a later attempt may get past (an APIError only when _retryable).
TRANSIENT = (
    APIError,
    TimeoutError,  # nats.errors.TimeoutError is one
    NoRespondersError,
    NoStreamResponseError,  # what nats-py makes of "no responders" for JetStream
    OutboundBufferLimitError,  # reconnecting, and the client's buffer is full
    ConnectionReconnectingError,
)
PUBLISH_TIMEOUT = 10.0
# JetStream's "insufficient resources" (10023: the server's max_file_store or max_memory_store
# is reached) and "insufficient storage resources available" (10047): VF_BROKER_FULL
BROKER_FULL = (10023, 10047)
# "stream store failed" (10077) saying "maximum bytes exceeded": the stream's own max_bytes
# (STREAM-6), its share of the store, is reached; a DiscardNew stream refuses the publish
STREAM_STORE_FAILED, MAX_BYTES_TEXT = 10077, "maximum bytes exceeded"
LIFE_HEADER, GENERATION_HEADER, EXACT_HEADER = "VF-Life", "VF-Generation", "VF-Count-Exact"
REALTIME_TIMEOUT = 2.0
# How long a stopping replica tries its end-of-stream marker: its broker may be gone for good
# (the whole tree deleted at once), and the pod's grace is 30 s.
STOP_MARKER_PATIENCE = 5.0
SAMPLE_WINDOW = 60.0


@dataclass(frozen=True, kw_only=True)
class Stamp:
    """Identity and timing of one output: carried from the inputs or minted by a producer."""

    trace_id: str
    seq: int
    event_ts: float | None
    metadata: Mapping[str, Any]
    context: Mapping[str, str] | None = None  # its trace context headers, when traced


@dataclass(frozen=True)
class Prepared:
    """An encoded output, ready to publish; ``size`` is its payload's, before any offload.

    ``context`` holds the headers of its trace context (TRACE-1), None when untraced.
    """

    raw: bytes
    message_id: str
    size: int = 0
    context: Mapping[str, str] | None = None


class Publisher:
    """Publishes one node's outputs onto its stream."""

    def __init__(
        self,
        client: Client,
        *,
        config: WorkerConfig,
        metrics: Metrics,
        blobs: BlobStore | None,
        stopping: Callable[[], bool],
    ) -> None:
        self.js = client.jetstream(timeout=10)
        self.acks = AckInbox(client)
        self.config = config
        self.names = config.names
        self.subject = self.names.subject(config.node_name)
        self.metrics = metrics
        self.blobs = blobs
        self.stopping = stopping
        self.readers: tuple[str, ...] = ()
        self.distinct = 0
        self.exact = True  # no publish was ambiguous, so ``distinct`` is what the stream took
        self.held_back = False  # a publish is being retried (full stream, broker away)
        self.broker_full = False  # the publish being retried was refused for want of storage
        # outputs given up on when the replica stopped while they were held back (ADR 0244),
        # and the broker's last word on them
        self.withheld = 0
        self.withheld_by: BaseException | None = None
        self.waiting: collections.deque[tuple[float, str]] = collections.deque()
        self.sweeper: asyncio.Task[None] | None = None
        # who published: this process's life and the generation, for the readers' EOS check
        self.stamp = {LIFE_HEADER: secrets.token_hex(6)}
        if config.generation:
            self.stamp[GENERATION_HEADER] = config.generation

    def _envelope(self, *, stamp: Stamp, payload: tuple[str, bytes]) -> Envelope:
        """A data envelope of this replica's (terminators replace its type and error)."""
        config = self.config
        return data_envelope(
            producer=config.node_name,
            flow_id=config.flow_id,
            run_id=config.run_id,
            trace_id=stamp.trace_id,
            seq=stamp.seq,
            event_ts=stamp.event_ts,
            replica_id=config.replica_id,
            metadata=stamp.metadata,
            payload_type=payload[0],
            payload=payload[1],
        )

    async def prepare(self, value: Any, stamp: Stamp) -> Prepared:
        """Encode one output (offloading a large payload); loops call this in order."""
        payload = encode_payload(value)
        envelope = self._envelope(stamp=stamp, payload=payload)
        if len(payload[1]) > self.config.max_inline_bytes:
            envelope = await self._offload(envelope)
        raw, size = encode_envelope(envelope), len(payload[1])
        return Prepared(raw=raw, message_id=envelope.message_id, size=size, context=stamp.context)

    async def start(self) -> None:
        await self.acks.start()

    async def submit(self, prepared: Prepared) -> asyncio.Future[bool]:
        """Hand a prepared output to the connection; the future settles with the stream's ack.

        Its result says whether the stream already had the message (a duplicate).
        Outputs submitted in order reach the stream in order. Every future settles:
        with the ack, the broker's refusal, or a timeout after ``PUBLISH_TIMEOUT``.
        """
        headers = {"Nats-Msg-Id": prepared.message_id, "VF-Env": "4", **self.stamp}
        if prepared.context is not None:
            headers.update(prepared.context)
        try:
            token, future = await self.acks.publish(self.subject, prepared.raw, headers=headers)
        except TRANSIENT as exc:  # reconnecting with a full buffer: confirm() retries it
            failed: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
            failed.set_exception(exc)
            return failed
        timeout = PUBLISH_TIMEOUT if self.config.flow_type == BATCH else REALTIME_TIMEOUT
        self.waiting.append((time.monotonic() + timeout, token))
        if self.sweeper is None or self.sweeper.done():
            self.sweeper = asyncio.create_task(self._sweep())
        return future

    async def confirm(self, prepared: Prepared, future: asyncio.Future[bool]) -> bool:
        """Wait for a submitted output; a failed one is republished with DELIV-2's patience.

        False: a REALTIME output the broker did not take, dropped. :class:`Stopped`: a BATCH
        output still held back when the replica stopped, not published (counted in
        ``withheld``); whatever consumed its inputs leaves them un-acked.
        """
        try:
            fresh = not await future
        except TRANSIENT as exc:
            if isinstance(exc, APIError) and not _retryable(exc):
                raise
            if self.config.flow_type != BATCH:
                log.warning("dropped a REALTIME output after a failed publish: %s", exc)
                return False
            self._held_back(exc)
            await asyncio.sleep(BACKOFF[0])
            raw, msg_id = prepared.raw, prepared.message_id
            try:
                stored = await self._send(
                    raw, subject=self.subject, msg_id=msg_id, extra=prepared.context
                )
            except Stopped:
                self.withheld += 1
                raise
            # After an unanswered attempt a "duplicate" is most likely that attempt itself,
            # but it may be a sibling's copy: the count is no longer exact (EOS-6).
            fresh = stored or not isinstance(exc, APIError)
            self.exact = self.exact and (stored or isinstance(exc, APIError))
        if fresh:
            self.distinct += 1
            self.metrics.bump("published")
        else:
            self.metrics.bump("deduplicated")
        return True

    async def _sweep(self) -> None:
        """Time out submitted publishes the broker never answered (a restart, a lost reply)."""
        while self.waiting:
            await asyncio.sleep(SWEEP_EVERY)
            now = time.monotonic()
            while self.waiting and (
                self.waiting[0][1] not in self.acks.waiting or self.waiting[0][0] <= now
            ):
                _, token = self.waiting.popleft()
                self.acks.expire(token, NatsTimeout())

    def reconnected(self) -> None:
        """Replies to publishes in flight when the connection dropped never come: retry now."""
        while self.waiting:
            _, token = self.waiting.popleft()
            self.acks.expire(token, ConnectionReconnectingError())

    async def close(self) -> None:
        if self.sweeper is not None:
            self.sweeper.cancel()
        await self.acks.stop()

    def _held_back(self, exc: BaseException) -> None:
        self.metrics.retried("publish")
        self.metrics.beat()
        if broker_full(exc):
            self.metrics.retried("broker_full")
            if not self.broker_full:
                log.warning(
                    "warning[VF_BROKER_FULL] JetStream has no storage left for %s (%s); "
                    "holding the output back and retrying until readers' acks free room",
                    self.subject,
                    exc,
                )
                self.broker_full = True
        if not self.held_back:
            log.warning("publishing to %s held back, retrying: %s", self.subject, exc)
            self.held_back = True

    def report_withheld(self) -> None:
        """Say which outputs a stop left unpublished, and why they were held back."""
        if not self.withheld:
            return
        cause = self.withheld_by
        full = cause is not None and broker_full(cause)
        code = "VF_BROKER_FULL" if full else "VF_BROKER_UNAVAILABLE"
        config = self.config
        print(
            f"warning[{code}] '{config.node_name}' replica {config.replica_id} stopped with "
            f"{self.distinct} output(s) published and {self.withheld} held back: {self.subject} "
            f"did not take them ({cause}); they were not published\n"
            "  = fix: let the stream's readers catch up, or give the broker a larger volume "
            "(broker.storage_size), before the next run",
            file=sys.stderr,
            flush=True,
        )

    async def _offload(self, envelope: Envelope) -> Envelope:
        if self.blobs is None:
            raise WireError(
                "VF_BLOB_NO_STORE",
                f"payload of {len(envelope.payload)} bytes exceeds the inline limit of "
                f"{self.config.max_inline_bytes} bytes and the environment has no payload "
                "store: give it one in vf.yaml (payload_store: {profile: dev}, or durable, "
                "cache, external) and recompile, or raise VF_MAX_INLINE_PAYLOAD_BYTES",
            )
        blobs = self.blobs
        generation = self.config.generation
        # a generation re-emits ids a killed one may have left blobs under (BLOB-1)
        key = f"{generation}-{envelope.message_id}" if generation else envelope.message_id
        ref = await patiently(
            lambda: blobs.put(key, envelope.payload, readers=self.readers),
            what="offload",
            stopping=self.stopping,
            on_retry=self._store_retry,
            full_patience=self.config.store_full_seconds,
        )
        blob = BlobRef(
            ref=ref, inner_payload_type=envelope.payload_type, size=len(envelope.payload)
        )
        payload_type, data = encode_payload(blob)
        return dataclasses.replace(envelope, payload_type=payload_type, payload=data)

    def _store_retry(self) -> None:
        self.metrics.retried("store")
        self.metrics.beat()

    async def terminator(self, *, error: ErrorInfo | None = None) -> None:
        """This replica's end-of-stream (or abort) marker on its own EOS subject."""
        kind = EOS if error is None else ABORT
        trace = f"{'eos' if error is None else 'abort'}-r{self.config.replica_id}"
        stamp = Stamp(trace_id=trace, seq=self.distinct, event_ts=None, metadata={})
        envelope = dataclasses.replace(
            self._envelope(stamp=stamp, payload=("", b"")), type=kind, error=error
        )
        subject = self.names.eos_subject(self.config.node_name, replica=self.config.replica_id)
        stopping = self.stopping()
        deadline = time.monotonic() + STOP_MARKER_PATIENCE if stopping else None
        try:
            await self._send(
                encode_envelope(envelope),
                subject=subject,
                msg_id=envelope.message_id,
                always=True,
                extra={EXACT_HEADER: "1" if self.exact else "0"},
                deadline=deadline,
            )
        except TRANSIENT as exc:
            if not stopping or (isinstance(exc, APIError) and not _retryable(exc)):
                raise
            log.warning(
                "end-of-stream marker of '%s' replica %d not published: the broker did not "
                "take it within %gs of the stop (%s); its readers do not see this replica end",
                self.config.node_name,
                self.config.replica_id,
                STOP_MARKER_PATIENCE,
                exc,
            )

    async def _send(
        self,
        raw: bytes,
        *,
        subject: str,
        msg_id: str,
        always: bool = False,
        extra: Mapping[str, str] | None = None,
        deadline: float | None = None,
    ) -> bool:
        """Publish with the flow type's patience; True unless the stream saw it already.

        ``deadline`` (a ``time.monotonic()`` instant) ends the patience: the last failure
        is raised once no attempt fits before it.
        """
        headers = {"Nats-Msg-Id": msg_id, "VF-Env": "4", **self.stamp, **(extra or {})}
        patient = self.config.flow_type == BATCH or always
        attempt = 0
        while True:
            try:
                timeout = PUBLISH_TIMEOUT if patient else REALTIME_TIMEOUT
                if deadline is not None:
                    timeout = max(min(timeout, deadline - time.monotonic()), 0.1)
                ack = await self.js.publish(subject, raw, timeout=timeout, headers=headers)
                if self.held_back:
                    log.warning("publishing to %s resumed", subject)
                    self.held_back = self.broker_full = False
                return not ack.duplicate
            except TRANSIENT as exc:
                if not patient:
                    log.warning("dropped a REALTIME output after a failed publish: %s", exc)
                    return False
                if isinstance(exc, APIError) and not _retryable(exc):
                    raise
                if self.stopping() and not always:
                    # held back when the stop came: given up, not published (ADR 0244); an
                    # unanswered last attempt may have been stored after all
                    self.exact = self.exact and isinstance(exc, APIError)
                    self.withheld_by = exc
                    raise Stopped(f"stopped while publishing to {subject} was held back") from exc
                pause = BACKOFF[min(attempt, len(BACKOFF) - 1)]
                if deadline is not None and time.monotonic() + pause >= deadline:
                    raise
                self._held_back(exc)
                await asyncio.sleep(pause)
                attempt += 1


def _retryable(exc: APIError) -> bool:
    text = (exc.description or "").lower()
    return "maximum" in text or "full" in text or exc.code in (503, 408) or broker_full(exc)


def broker_full(exc: BaseException) -> bool:
    """Whether JetStream refused a publish for want of storage (VF_BROKER_FULL): the
    server's store, or the stream's own share of it (STREAM-6)."""
    if not isinstance(exc, APIError):
        return False
    if exc.err_code == STREAM_STORE_FAILED:
        return MAX_BYTES_TEXT in (exc.description or "").lower()
    return exc.err_code in BROKER_FULL


def trace_context(headers: Mapping[str, str] | None) -> dict[str, str]:
    """The W3C trace context a message carries (TRACE-1), as its dead letter keeps it."""
    found = headers or {}
    return {name: found[name] for name in (TRACEPARENT, TRACESTATE) if found.get(name)}


class DeadLetters:
    """Copies failed messages, raw bytes and reason headers, to the flow's DLQ."""

    def __init__(self, js: JetStreamContext, *, config: WorkerConfig, metrics: Metrics) -> None:
        self.js = js
        self.config = config
        self.metrics = metrics
        names = config.names
        self.subject = names.dlq_subject(config.node_name)
        generation = config.generation
        self.run_scope = f"{config.run_id}.{generation}" if generation else config.run_id
        self.samples: dict[str, list[float]] = defaultdict(list)
        # the messages whose dead letters the stream refused for want of room (ADR 0239)
        self.refused: list[str] = []

    @property
    def full(self) -> str | None:
        """The messages whose dead letters were refused for want of room, in words."""
        if not self.refused:
            return None
        more = len(self.refused) - 3
        return ", ".join(self.refused[:3]) + (f" and {more} more" if more > 0 else "")

    def _sampled_out(self, code: str) -> bool:
        if self.config.delivery.dlq == "off":
            return True
        if self.config.delivery.dlq != "sampled":
            return False
        now = time.monotonic()
        recent = [t for t in self.samples[code] if now - t < SAMPLE_WINDOW]
        self.samples[code] = recent
        if len(recent) >= self.config.delivery.sample_per_minute:
            return True
        recent.append(now)
        return False

    async def send(self, msg: Msg, *, code: str, reason: str, disposition: str) -> bool:
        """Dead-letter ``msg``; False when the DLQ could not take it (the caller naks)."""
        if self._sampled_out(code):
            return True
        meta = msg.metadata
        headers = {
            "Nats-Msg-Id": f"dlq:{self.config.flow_id}:{self.run_scope}:"
            f"{self.config.node_name}:{meta.stream}:{meta.sequence.stream}",
            "VF-Origin-Node": self.config.node_name,
            "VF-Origin-Stream": meta.stream,
            "VF-Run-Id": self.config.run_id,
            "VF-Generation": self.config.generation,
            "VF-Code": code,
            "VF-Error": reason[:256],
            "VF-Disposition": disposition,
            "VF-Num-Delivered": str(meta.num_delivered),
            **trace_context(msg.headers),
        }
        for attempt in range(3):
            try:
                await self.js.publish(self.subject, msg.data, timeout=5.0, headers=headers)
                self.metrics.dead_lettered(code)
                log.error(
                    "dead-lettered %s#%d: %s %s", meta.stream, meta.sequence.stream, code, reason
                )
                return True
            except Exception as exc:
                if broker_full(exc):  # dead letters leave it only by age: no point waiting
                    self.refused.append(f"{meta.stream}#{meta.sequence.stream} ({code})")
                    log.error("the dead-letter stream refused %s: %s", self.refused[-1], exc)
                    return False
                log.warning("DLQ publish failed (attempt %d): %s", attempt + 1, exc)
                await asyncio.sleep(0.1 * (attempt + 1))
        return False
