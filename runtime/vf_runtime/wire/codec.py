"""The v4 envelope: encode, decode and derive message ids.

Decoding refuses what is not a v4 protobuf envelope (legacy msgpack, other
versions, garbage) with a :class:`WireError` naming the reason; it never guesses.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError

from vf_runtime.wire import envelope_pb2 as pb
from vf_runtime.wire.values import WireError, fill_entries, from_value

VERSION = 4
DATA, EOS, ABORT = "data", "eos", "abort"
_TYPES = {DATA: pb.MSG_TYPE_DATA, EOS: pb.MSG_TYPE_EOS, ABORT: pb.MSG_TYPE_ABORT}
_TYPE_NAMES = {int(number): name for name, number in _TYPES.items()}
DISPOSITIONS = ("unspecified", "poison", "transient", "worker_fatal")
# First bytes of a msgpack map (fixmap, map16, map32): videoflow's v2/v3 wire.
_MSGPACK_FIRST = frozenset([*range(0x80, 0x90), 0xDE, 0xDF])


@dataclass(frozen=True, kw_only=True)
class ErrorInfo:
    """Why a message failed: a stable code, the message, the fix and the disposition."""

    code: str
    message: str
    remedy: str = ""
    disposition: str = "unspecified"
    node: str = ""
    trace_id: str = ""
    num_delivered: int = 0
    context: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Envelope:
    """One message on the wire. ``payload`` is still encoded; see ``decode_payload``."""

    type: str
    producer: str
    flow_id: str
    run_id: str
    trace_id: str
    seq: int
    event_ts: float | None = None
    span_id: str = ""
    parent_span_id: str = ""
    replica_id: int = 0
    metadata: Mapping[str, Any] = field(default_factory=dict)
    payload_type: str = ""
    payload: bytes = b""
    error: ErrorInfo | None = None
    version: int = VERSION

    @property
    def message_id(self) -> str:
        return message_id(
            flow_id=self.flow_id,
            run_id=self.run_id,
            producer=self.producer,
            trace_id=self.trace_id,
            seq=self.seq,
            msg_type=self.type,
        )


def _assemble(**fields: Any) -> Envelope:
    """An :class:`Envelope` from every one of its fields, all set at once.

    A frozen dataclass sets each field through ``object.__setattr__``, which costs
    more than the rest of decoding a small message. The callers on the hot paths
    name every field with a value of its type, so the instance is filled in one go;
    it is as immutable and compares as equal as one built by ``Envelope(...)``.
    """
    envelope = object.__new__(Envelope)
    envelope.__dict__.update(fields)
    return envelope


def data_envelope(
    *,
    producer: str,
    flow_id: str,
    run_id: str,
    trace_id: str,
    seq: int,
    event_ts: float | None,
    replica_id: int,
    metadata: Mapping[str, Any],
    payload_type: str,
    payload: bytes,
) -> Envelope:
    """A data envelope, the same as ``Envelope(type=DATA, ...)`` with these fields."""
    return _assemble(
        type=DATA,
        producer=producer,
        flow_id=flow_id,
        run_id=run_id,
        trace_id=trace_id,
        seq=seq,
        event_ts=event_ts,
        span_id="",
        parent_span_id="",
        replica_id=replica_id,
        metadata=metadata,
        payload_type=payload_type,
        payload=payload,
        error=None,
        version=VERSION,
    )


def message_id(
    *, flow_id: str, run_id: str, producer: str, trace_id: str, seq: int, msg_type: str
) -> str:
    """The de-duplication id: 32 hex digits of SHA-256 over the message's identity."""
    text = f"{flow_id}:{run_id}:{producer}:{trace_id}:{seq}:{msg_type}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def encode_envelope(envelope: Envelope) -> bytes:
    """The envelope's wire bytes (metadata in the mapping's own order)."""
    if envelope.type not in _TYPES:
        raise WireError("VF_WIRE_TYPE", f"unknown message type {envelope.type!r}")
    message = pb.Envelope(
        v=envelope.version,
        type=_TYPES[envelope.type],
        producer_name=envelope.producer,
        flow_id=envelope.flow_id,
        run_id=envelope.run_id,
        trace_id=envelope.trace_id,
        seq=envelope.seq,
        span_id=envelope.span_id,
        parent_span_id=envelope.parent_span_id,
        replica_id=envelope.replica_id,
        payload_type=envelope.payload_type,
        payload=envelope.payload,
    )
    fill_entries(message.metadata, envelope.metadata, tensors=False)
    if envelope.event_ts is not None:
        message.event_ts = envelope.event_ts
    if envelope.error is not None:
        message.error.CopyFrom(_error_to_pb(envelope.error))
    return bytes(message.SerializeToString())


def decode_envelope(data: bytes) -> Envelope:
    """Parse wire bytes; raise :class:`WireError` for anything but a v4 envelope."""
    if not data:
        raise WireError("VF_WIRE_EMPTY", "empty message: not a v4 envelope")
    if data[0] in _MSGPACK_FIRST:
        raise WireError(
            "VF_WIRE_LEGACY",
            "legacy msgpack (v2/v3) envelope refused: vf speaks only the protobuf v4 envelope",
        )
    try:
        message = pb.Envelope.FromString(data)
    except DecodeError as exc:
        raise WireError("VF_WIRE_DECODE", f"not a protobuf v4 envelope: {exc}") from exc
    if message.v != VERSION:
        raise WireError(
            "VF_WIRE_VERSION", f"envelope version {message.v} is not supported (only {VERSION})"
        )
    kind = _TYPE_NAMES.get(int(message.type))
    if kind is None:
        raise WireError("VF_WIRE_TYPE", f"envelope has unknown message type {message.type}")
    metadata = {entry.key: from_value(entry.value) for entry in message.metadata}
    return _assemble(
        type=kind,
        producer=message.producer_name,
        flow_id=message.flow_id,
        run_id=message.run_id,
        trace_id=message.trace_id,
        seq=message.seq,
        event_ts=message.event_ts if message.HasField("event_ts") else None,
        span_id=message.span_id,
        parent_span_id=message.parent_span_id,
        replica_id=message.replica_id,
        metadata=metadata,
        payload_type=message.payload_type,
        payload=message.payload,
        error=_error_from_pb(message.error) if message.HasField("error") else None,
        version=message.v,
    )


def _error_to_pb(error: ErrorInfo) -> pb.Error:
    disposition = DISPOSITIONS.index(error.disposition) if error.disposition in DISPOSITIONS else 0
    return pb.Error(
        code=error.code,
        message=error.message,
        remedy=error.remedy,
        disposition=pb.Disposition.Value(pb.Disposition.Name(disposition)),
        node=error.node,
        trace_id=error.trace_id,
        num_delivered=error.num_delivered,
        context=[pb.StringEntry(key=k, value=v) for k, v in error.context.items()],
    )


def _error_from_pb(error: pb.Error) -> ErrorInfo:
    index = int(error.disposition)
    return ErrorInfo(
        code=error.code,
        message=error.message,
        remedy=error.remedy,
        disposition=DISPOSITIONS[index] if index < len(DISPOSITIONS) else "unspecified",
        node=error.node,
        trace_id=error.trace_id,
        num_delivered=error.num_delivered,
        context={entry.key: entry.value for entry in error.context},
    )
