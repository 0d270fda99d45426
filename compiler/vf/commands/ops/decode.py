"""An envelope in human form: ids, trace, metadata and a bounded rendering of its payload.

Input is raw wire bytes, their hex or base64, or a JSON record with ``data_b64`` (as
``vf run-local`` keeps dead letters). Bytes that are not a v4 envelope get the reason
the worker gives (PROTOCOL WIRE-3) as a named error.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Mapping
from typing import Any

from vf.errors import VfError
from vf.textio.safe_read import load_json
from vf_runtime.wire import BLOB_REF, Envelope, WireError, decode_envelope, decode_payload
from vf_runtime.wire.payloads import BlobRef, Detections, Frame, RawPayload, Tensor, Tracks

FIRST_VALUES = 8
RECORD_DEPTH = 8  # a JSON record nests a few levels at most
MAX_INPUT_BYTES = 64 * 1024 * 1024  # above any message a broker stores
TEXT_LIMIT = 200
_HEX = re.compile(rb"^(?:[0-9a-fA-F]{2})+$")
_B64 = re.compile(rb"^[A-Za-z0-9+/=_-]+$")
_STRUCT = {
    "bool": "?",
    "int8": "b",
    "uint8": "B",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "uint64": "Q",
    "float16": "e",
    "float32": "f",
    "float64": "d",
}


def _convert(text: bytes, encoding: str) -> bytes:
    if encoding in ("hex", "base64"):
        text = b"".join(text.split())
    if encoding == "hex":
        return binascii.unhexlify(text)
    if encoding == "base64":
        padded = text + b"=" * (-len(text) % 4)
        url_safe = b"-" in text or b"_" in text
        return base64.b64decode(padded, altchars=b"-_" if url_safe else None, validate=True)
    if encoding == "json":  # a record of vf run-local's copy: {"data_b64": ...}
        return base64.b64decode(load_json(text, max_depth=RECORD_DEPTH)["data_b64"])
    return text


def _guesses(raw: bytes) -> list[str]:
    """The forms text input may be in, most specific first; raw bytes always last."""
    text = b"".join(raw.split())
    if text.startswith(b"{"):
        return ["json", "raw"]
    found = ["hex"] if text and _HEX.match(text) else []
    found += ["base64"] if text and _B64.match(text) else []
    return [*found, "raw"]


def read_envelope(raw: bytes, *, encoding: str, where: str) -> Envelope:
    """The envelope in what the user gave; ``auto`` takes the first form that decodes,
    and reports the raw bytes' reason when none does."""
    if encoding != "auto":
        try:
            data = _convert(raw.strip() if encoding != "raw" else raw, encoding)
        except (ValueError, KeyError, TypeError) as exc:
            raise VfError(
                "VF_DECODE_INPUT",
                f"the input is not valid {encoding}: {exc}",
                "pass the raw bytes, their hex or base64, or a record with data_b64 "
                "(--encoding raw|hex|base64|json)",
                where,
            ) from None
        return parse(data, where=where)
    for form in _guesses(raw)[:-1]:
        try:
            return decode_envelope(_convert(raw.strip(), form))
        except (ValueError, KeyError, TypeError):
            continue
    return parse(raw, where=where)


def parse(data: bytes, *, where: str) -> Envelope:
    """The envelope, or the worker's own reason for refusing the bytes."""
    try:
        return decode_envelope(data)
    except WireError as exc:
        raise VfError(
            exc.code,
            f"{len(data)} byte(s) are not a vf v4 envelope: {exc}",
            "decode the message body as the broker stores it (nats stream get shows it), "
            "not its log line; a worker dead-letters these bytes as VF_POISON_DECODE",
            where,
        ) from None


def describe(envelope: Envelope, *, resolved: bytes | None = None) -> dict[str, Any]:
    """Every field of the envelope, the payload summarised (``resolved``: a blob's bytes)."""
    found: dict[str, Any] = {
        "type": envelope.type,
        "message_id": envelope.message_id,
        "producer": envelope.producer,
        "flow_id": envelope.flow_id,
        "run_id": envelope.run_id,
        "trace_id": envelope.trace_id,
        "seq": envelope.seq,
        "replica_id": envelope.replica_id,
        "event_ts": envelope.event_ts,
        "span_id": envelope.span_id,
        "parent_span_id": envelope.parent_span_id,
        "metadata": {str(k): summarise(v) for k, v in envelope.metadata.items()},
        "payload_type": envelope.payload_type,
        "payload_bytes": len(envelope.payload),
        "payload": payload_summary(envelope.payload_type, envelope.payload, resolved=resolved),
    }
    if envelope.error is not None:
        found["error"] = {
            "code": envelope.error.code,
            "message": envelope.error.message,
            "disposition": envelope.error.disposition,
        }
    return found


def payload_summary(payload_type: str, data: bytes, *, resolved: bytes | None = None) -> Any:
    """A bounded rendering of a payload; a blob reference says where the payload is."""
    try:
        value = decode_payload(payload_type, data)
    except WireError as exc:
        return f"<undecodable {payload_type} payload: {exc.code}: {exc}>"
    if isinstance(value, BlobRef):
        found: dict[str, Any] = {"ref": value.ref, "type": value.inner_payload_type}
        found["size"] = value.size
        if resolved is not None:
            found["resolved"] = payload_summary(value.inner_payload_type, resolved)
        return found
    return summarise(value)


def summarise(value: Any) -> Any:
    """A JSON-friendly, bounded form of a decoded value."""
    if isinstance(value, Tensor | Frame | Detections | Tracks | RawPayload):
        return _typed_summary(value)
    if isinstance(value, Mapping):
        return {str(k): summarise(v) for k, v in list(value.items())[: FIRST_VALUES * 4]}
    if isinstance(value, list | tuple):
        items = [summarise(v) for v in value[:FIRST_VALUES]]
        extra = len(value) - FIRST_VALUES
        return items + ([f"... {extra} more"] if extra > 0 else [])
    if isinstance(value, bytes):
        more = "..." if len(value) > 16 else ""
        return f"<{len(value)} byte(s): {value[:16].hex()}{more}>"
    if isinstance(value, str) and len(value) > TEXT_LIMIT:
        return value[:TEXT_LIMIT] + f"... ({len(value)} characters)"
    return value


def _typed_summary(value: Tensor | Frame | Detections | Tracks | RawPayload) -> Any:
    if isinstance(value, Tensor):
        return tensor_summary(value)
    if isinstance(value, Frame):
        return {"frame": value.pixel_format, "pixels": tensor_summary(value.pixels)}
    if isinstance(value, Detections):
        return {"detections": tensor_summary(value.boxes), "classes": list(value.class_names)}
    if isinstance(value, Tracks):
        return {"tracks": tensor_summary(value.tracks)}
    return f"<{len(value.data)} opaque byte(s) of {value.payload_type}>"


def tensor_summary(tensor: Tensor) -> str:
    """``float32[2, 3] = [0.0, 1.0, ...]``: dtype, shape and the first values."""
    shape = ", ".join(str(n) for n in tensor.shape)
    head = f"{tensor.dtype}[{shape}]"
    code = _STRUCT.get(tensor.dtype)
    if code is None:
        return f"{head} ({len(tensor.data)} bytes)"
    size = struct.calcsize(code)
    count = min(FIRST_VALUES, len(tensor.data) // size)
    values = list(struct.unpack(f"<{count}{code}", tensor.data[: count * size]))
    more = ", ..." if len(tensor.data) // size > count else ""
    return f"{head} = [{', '.join(repr(v) for v in values)}{more}]"


def blob_ref(envelope: Envelope) -> str | None:
    """The store key of an offloaded payload, or None."""
    if envelope.payload_type != BLOB_REF:
        return None
    try:
        ref = decode_payload(BLOB_REF, envelope.payload)
    except WireError:
        return None
    return ref.ref if isinstance(ref, BlobRef) else None
