"""vf's own wire conformance vectors, written from docs/PROTOCOL.md alone.

The bytes come from a protobuf writer of a few lines that knows only what PROTOCOL.md
(WIRE-1 to WIRE-7, MSGID-1) and ``proto/videoflow/v1/envelope.proto`` say: field numbers,
wire types, proto3's rule that a scalar at its default is not written, packed repeated
integers, zig-zag ``sint64``. It shares no code with protobuf or ``vf_runtime.wire``, so
a vector that vf decodes and re-encodes byte for byte holds the codec to the
specification, not to itself. ``VF_WRITE_VECTORS=1 pytest tests/runtime/wire/test_wire.py``
rewrites ``tests/fixtures/vectors/``; otherwise the tests hold the committed files to
what this module writes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

OWN_VECTORS = Path(__file__).resolve().parents[1] / "fixtures" / "vectors"

VERSION = 4
TYPES = {"data": 1, "eos": 2, "abort": 3}  # WIRE-4, field 2
TENSOR, VALUE = "videoflow.v1.Tensor", "videoflow.v1.Value"  # WIRE-5
VARINT, FIXED64, LENGTH = 0, 1, 2


def _varint(number: int) -> bytes:
    number &= (1 << 64) - 1  # a negative int64 is its 64-bit two's complement
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        out.append(low | (0x80 if number else 0))
        if not number:
            return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
    return _varint(field << 3 | wire_type)


def _int(field: int, number: int) -> bytes:
    return _key(field, VARINT) + _varint(number) if number else b""


def _len(field: int, data: bytes, *, always: bool = False) -> bytes:
    return _key(field, LENGTH) + _varint(len(data)) + data if data or always else b""


def _text(field: int, text: str) -> bytes:
    return _len(field, text.encode())


def _double(field: int, number: float) -> bytes:
    return _key(field, FIXED64) + struct.pack("<d", number)


def _tensor(notation: dict[str, Any]) -> bytes:
    shape = b"".join(_varint(n) for n in notation["shape"])  # packed repeated int64, field 1
    data = base64.b64decode(notation["data_b64"])
    return _len(1, shape) + _text(2, notation["dtype"]) + _len(3, data)


def _zigzag(number: int) -> int:
    return number << 1 if number >= 0 else (-number << 1) - 1


def _value(tagged: dict[str, Any]) -> bytes:
    """A ``Value`` (WIRE-5): one member of the union, written even at its default."""
    ((tag, item),) = tagged.items()
    members: dict[str, Callable[[], bytes]] = {
        "null": lambda: _key(1, VARINT) + _varint(0),
        "d": lambda: _double(2, item),
        "i": lambda: _key(3, VARINT) + _varint(_zigzag(item)),
        "s": lambda: _len(4, item.encode(), always=True),
        "b64": lambda: _len(5, base64.b64decode(item), always=True),
        "bool": lambda: _key(6, VARINT) + _varint(int(item)),
        "list": lambda: _len(
            7, b"".join(_len(1, _value(v), always=True) for v in item), always=True
        ),
        "map": lambda: _len(8, _entries(1, item), always=True),
        "tensor": lambda: _len(9, _tensor(item), always=True),
    }
    return members[tag]()


def _entries(field: int, mapping: dict[str, Any]) -> bytes:
    """Map entries in the mapping's order (WIRE-7): key 1, value 2."""
    return b"".join(
        _len(field, _text(1, key) + _len(2, _value(value), always=True), always=True)
        for key, value in mapping.items()
    )


def envelope_bytes(entry: dict[str, Any]) -> bytes:
    """An ``Envelope`` (WIRE-4) from a manifest entry, fields in number order."""
    payload = entry["payload"]
    if "tensor" in payload:
        payload_type, data = TENSOR, _tensor(payload["tensor"])
    elif "value" in payload:
        payload_type, data = VALUE, _value(payload["value"])
    elif "opaque" in payload:
        payload_type = payload["opaque"]["payload_type"]
        data = base64.b64decode(payload["opaque"]["data_b64"])
    else:
        payload_type, data = "", b""
    event_ts = entry["event_ts"]
    return b"".join(
        [
            _int(1, entry["version"]),
            _int(2, TYPES[entry["type"]]),
            _text(3, entry["producer_name"]),
            _text(4, entry["flow_id"]),
            _text(5, entry["run_id"]),
            _text(6, entry["trace_id"]),
            _int(7, entry["seq"]),
            b"" if event_ts is None else _double(8, event_ts),
            _int(11, entry["replica_id"]),
            _entries(12, entry["metadata"]["map"]),
            _text(13, payload_type),
            _len(14, data),
        ]
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _entry(name: str, payload: dict[str, Any], **fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": name,
        "file": f"{name}.bin",
        "version": VERSION,
        "type": "data",
        "producer_name": "reader",
        "flow_id": "spec-flow",
        "run_id": "r0spec1",
        "trace_id": "reader:5e5e5e5e5e5e:1",
        "seq": 1,
        "event_ts": None,
        "replica_id": 0,
        "metadata": {"map": {}},
        "payload": payload,
    }
    entry.update(fields)
    return entry


def envelope_entries() -> list[dict[str, Any]]:
    """The cases: every member of ``Value``, tensors of several shapes, the three types."""
    everything = {
        "null": {"null": True},
        "zero": {"d": 0.0},
        "negative": {"i": -3},
        "large": {"i": 2**63 - 1},
        "text": {"s": "gr\u00fc\u00dfe \U0001f4f7"},
        "empty": {"s": ""},
        "raw": {"b64": _b64(b"\x00\x01\xfe\xff")},
        "flag": {"bool": False},
        "items": {"list": [{"i": 0}, {"list": []}, {"map": {}}]},
    }
    scalar = {"shape": [], "dtype": "float64", "data_b64": _b64(struct.pack("<d", 2.5))}
    return [
        _entry("value_every_kind", {"value": {"map": everything}}, seq=7),
        _entry(
            "tensor_image",
            {
                "tensor": {
                    "shape": [2, 2, 1],
                    "dtype": "uint8",
                    "data_b64": _b64(b"\x01\x02\x03\x04"),
                }
            },
            event_ts=1712345678.125,
            metadata={"map": {"proctime": {"d": 0.003}, "camera": {"s": "left"}}},
            replica_id=5,
        ),
        _entry("tensor_zero_dim", {"tensor": scalar}, seq=2),
        _entry(
            "tensor_empty",
            {"tensor": {"shape": [0, 4], "dtype": "int16", "data_b64": ""}},
            event_ts=0.0,
        ),
        _entry(
            "value_in_metadata_order",
            {"value": {"i": 1}},
            metadata={"map": {"z": {"i": 1}, "a": {"i": 2}, "m": {"null": True}}},
        ),
        _entry("eos_marker", {"none": True}, type="eos", trace_id="eos-r3", seq=250, replica_id=3),
        _entry("abort_marker", {"none": True}, type="abort", trace_id="abort-r0", seq=0),
    ]


def reject_entries() -> list[tuple[dict[str, Any], bytes]]:
    """What a decoder refuses (WIRE-3) or carries without reading (WIRE-5)."""
    legacy = b"\x84\xa1v\x03\xa4type\xa4data\xa3seq\x01\xa7payload\xc0"  # a v3 msgpack map
    opaque = b"\x08\x96\x01 not for vf to read"
    carried = _entry(
        "unknown_payload_type",
        {"opaque": {"payload_type": "vendor.example.Thing", "data_b64": _b64(opaque)}},
    )
    return [
        (
            {
                "name": "legacy_msgpack",
                "file": "legacy_msgpack.bin",
                "expect": {"reject": {"message_contains": "msgpack"}},
            },
            legacy,
        ),
        (
            {
                "name": "unknown_payload_type",
                "file": "unknown_payload_type.bin",
                "expect": {"opaque": carried["payload"]["opaque"]},
            },
            envelope_bytes(carried),
        ),
        (
            {
                "name": "version_3",
                "file": "version_3.bin",
                "expect": {"reject": {"message_contains": "version"}},
            },
            envelope_bytes(_entry("v3", {"none": True}, version=3)),
        ),
    ]


def message_id_vectors() -> list[dict[str, Any]]:
    """MSGID-1: the first 32 hex digits of SHA-256 over ``flow:run:producer:trace:seq:type``."""
    identities = [
        ("spec-flow", "r0spec1", "reader", "reader:5e5e5e5e5e5e:1", 1, "data"),
        ("spec-flow", "r0spec1", "reader", "eos-r3", 250, "eos"),
        ("spec-flow", "r0spec1", "reader", "abort-r0", 0, "abort"),
        ("fl\u00fc\u00df", "r", "p", "p:42", 42, "data"),
    ]
    return [
        {
            "flow_id": flow,
            "run_id": run,
            "producer_name": producer,
            "trace_id": trace,
            "seq": seq,
            "msg_type": kind,
            "expected_id": hashlib.sha256(
                f"{flow}:{run}:{producer}:{trace}:{seq}:{kind}".encode()
            ).hexdigest()[:32],
        }
        for flow, run, producer, trace, seq, kind in identities
    ]


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def expected_files() -> dict[str, bytes]:
    """Every file of ``tests/fixtures/vectors/``, by its path there."""
    files: dict[str, bytes] = {}
    entries = envelope_entries()
    for entry in entries:
        files[f"envelope/{entry['file']}"] = envelope_bytes(entry)
    files["envelope/manifest.json"] = _json(entries).encode()
    rejects = reject_entries()
    for entry, data in rejects:
        files[f"reject/{entry['file']}"] = data
    files["reject/manifest.json"] = _json([entry for entry, _ in rejects]).encode()
    files["message_id/vectors.json"] = _json(message_id_vectors()).encode()
    return files
