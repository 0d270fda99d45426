"""Republishing dead letters to the input of the node that set them aside.

A replay publishes the original bytes on the data subject of the envelope's producer
in the run and generation that dead-lettered it, under a message id of its own
(``replay:{replay id}:{flow}:{DLQ seq}``) so the stream never drops it as a duplicate
of the original or of an earlier replay, and with ``VF-Replay-Of`` / ``VF-Replay-Id``
headers so every replayed message can be traced to its record; the item's
``traceparent`` (and ``tracestate``), kept by its dead letter, goes with it, so a replay
continues the item's trace. Each record is checked first and refused by name when
replaying it cannot work: the run's stream is gone, the node no longer reads it, another
node reads it too, the envelope does not decode or belongs elsewhere, its offloaded
payload is no longer in the store, or it belongs to a BATCH generation that no longer
reads the node's input (a finished generation does not run again, PROTOCOL GEN-7).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from nats.js import JetStreamContext
from nats.js.api import RetentionPolicy
from nats.js.errors import NotFoundError
from redis.asyncio import Redis

from vf.commands.ops.dlq import DeadLetter, dlq_stream
from vf_runtime.broker.inventory import Durable, durables
from vf_runtime.broker.naming import RunNames
from vf_runtime.wire import BLOB_REF, DATA, WireError, decode_envelope, decode_payload
from vf_runtime.wire.payloads import BlobRef
from vf_runtime.worker.tracing import TRACEPARENT, TRACESTATE

REPLAY_OF, REPLAY_ID = "VF-Replay-Of", "VF-Replay-Id"


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """What replaying one dead letter does (or would do), or why it is refused."""

    letter: DeadLetter
    subject: str = ""
    refused: str = ""

    @property
    def ok(self) -> bool:
        return not self.refused


def replay_id() -> str:
    """12 random hex digits naming one replay; also the replay's publisher life (EOS-6)."""
    return secrets.token_hex(6)


async def judge(js: JetStreamContext, letter: DeadLetter, store: Redis | None) -> Verdict:
    """Whether ``letter`` can be replayed, and onto which subject."""
    try:
        envelope = decode_envelope(letter.data)
    except WireError as exc:
        return Verdict(letter=letter, refused=f"{exc.code}: the bytes are not an envelope ({exc})")
    if envelope.type != DATA:
        return Verdict(letter=letter, refused=f"it is a {envelope.type} marker, not an item")
    names = RunNames(envelope.flow_id, envelope.run_id, letter.generation)
    if envelope.run_id != letter.run_id or names.dlq_stream() != dlq_stream(letter.flow):
        return Verdict(letter=letter, refused="the envelope belongs to another flow or run")
    stream = names.stream(envelope.producer)
    problem, readers = await _stream_problem(js, letter, stream)
    if not problem and envelope.payload_type == BLOB_REF:
        problem = await _payload_problem(envelope.payload, store)
    if not problem and await _batch(js, stream) and not any(d.live(_now()) for d in readers):
        problem = (
            f"BATCH generation {letter.generation or '-'} no longer reads node {letter.node}'s "
            "input: a finished generation does not run again (PROTOCOL GEN-7); fix the cause "
            "and run the flow again (a new generation processes every item), or export the "
            "records (vf dlq export) for a repair run (docs/operations.md)"
        )
    return Verdict(letter=letter, subject=names.subject(envelope.producer), refused=problem)


def _now() -> datetime:
    return datetime.now(UTC)


async def _batch(js: JetStreamContext, stream: str) -> bool:
    """BATCH streams keep messages for their readers (interest retention, STREAM-3)."""
    info = await js.stream_info(stream)
    return info.config.retention == RetentionPolicy.INTEREST


async def _stream_problem(
    js: JetStreamContext, letter: DeadLetter, stream: str
) -> tuple[str, list[Durable]]:
    """Why the origin stream cannot take the replay, and the origin node's durables."""
    run = f"run {letter.run_id}" + (f" generation {letter.generation}" if letter.generation else "")
    try:
        await js.stream_info(stream)
    except NotFoundError:
        return f"{run} no longer exists on this broker (stream {stream} is gone)", []
    readers = [d for d in await durables(js, stream) if d.role == "reader"]
    nodes = sorted({d.node for d in readers})
    if letter.node not in nodes:
        return f"node {letter.node} no longer reads {stream} in {run}", []
    others = [n for n in nodes if n != letter.node]
    if others:
        problem = (
            f"{stream} is also read by {', '.join(others)}, which would receive the item "
            "a second time"
        )
        return problem, []
    return "", readers


async def _payload_problem(payload: bytes, store: Redis | None) -> str:
    try:
        ref = decode_payload(BLOB_REF, payload)
    except WireError as exc:
        return f"{exc.code}: its payload reference does not parse ({exc})"
    assert isinstance(ref, BlobRef)
    if store is None:
        return f"its payload is offloaded to {ref.ref}; pass --redis to check it is still stored"
    if not await store.exists(ref.ref):
        return f"its payload {ref.ref} has expired from the store"
    return ""


async def publish(js: JetStreamContext, verdict: Verdict, replay: str) -> int:
    """Publish one accepted replay; return its sequence in the origin stream."""
    letter = verdict.letter
    headers = {
        "Nats-Msg-Id": f"replay:{replay}:{letter.id}",
        REPLAY_OF: f"{dlq_stream(letter.flow)}:{letter.seq}",
        REPLAY_ID: replay,
        "VF-Env": "4",
        "VF-Life": replay,
    }
    if letter.generation:
        headers["VF-Generation"] = letter.generation
    for name in (TRACEPARENT, TRACESTATE):  # the item's trace goes on (TRACE-1)
        if letter.header(name):
            headers[name] = letter.header(name)
    ack = await js.publish(verdict.subject, letter.data, headers=headers, timeout=5.0)
    return int(ack.seq)
