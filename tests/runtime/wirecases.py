"""Helpers shared by the wire tests: the vectors' tagged value notation and vf's own cases."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from vf_runtime.wire import (
    ABORT,
    DATA,
    EOS,
    Detections,
    Envelope,
    ErrorInfo,
    Frame,
    Tensor,
    Tracks,
    encode_payload,
)

REPO = Path(__file__).resolve().parents[2]
VECTORS = REPO.parent / "shared" / "vectors"
GOLDEN = Path(__file__).resolve().parent / "golden"


_SCALAR_TAGS: tuple[tuple[type, str], ...] = ((bool, "bool"), (int, "i"), (float, "d"), (str, "s"))


def tagged(value: Any) -> dict[str, Any]:
    """A decoded value in the vectors' notation: {"i": 7}, {"map": {...}}, ..."""
    if value is None:
        return {"null": True}
    for kind, tag in _SCALAR_TAGS:
        if isinstance(value, kind):
            return {tag: value}
    if isinstance(value, bytes):
        return {"b64": base64.b64encode(value).decode()}
    if isinstance(value, list):
        return {"list": [tagged(v) for v in value]}
    if isinstance(value, dict):
        return {"map": {k: tagged(v) for k, v in value.items()}}
    if isinstance(value, Tensor):
        return {"tensor": tensor_notation(value)}
    raise TypeError(f"no notation for {type(value).__name__}")


def tensor_notation(tensor: Tensor) -> dict[str, Any]:
    return {
        "shape": list(tensor.shape),
        "dtype": tensor.dtype,
        "data_b64": base64.b64encode(tensor.data).decode(),
    }


def _tensor(shape: tuple[int, ...], dtype: str, data: bytes) -> Tensor:
    return Tensor(shape=shape, dtype=dtype, data=data)


def _envelope(name: str, payload: Any, **fields: Any) -> tuple[str, Envelope]:
    payload_type, data = ("", b"") if payload is None else encode_payload(payload)
    base: dict[str, Any] = {
        "type": DATA,
        "producer": "camera",
        "flow_id": "demo",
        "run_id": "r1a2b3c",
        "trace_id": "camera:0a1b2c3d4e5f:1",
        "seq": 1,
    }
    base.update(fields)
    return name, Envelope(**base, payload_type=payload_type, payload=data)


def vf_cases() -> list[tuple[str, Envelope]]:
    """vf's own golden envelopes: what its encoder must keep producing byte for byte."""
    pixels = _tensor((2, 2, 3), "uint8", bytes(range(12)))
    return [
        _envelope(
            "frame_with_capture_ts",
            Frame(pixels=pixels, pixel_format="rgb8", capture_ts=12.5),
            event_ts=1700000000.25,
            metadata={"proctime": 0.001, "camera": "front"},
        ),
        _envelope(
            "detections",
            Detections(boxes=_tensor((1, 6), "float32", bytes(24)), class_names=("car",)),
            producer="detector",
            replica_id=3,
        ),
        _envelope("tracks", Tracks(tracks=_tensor((0, 5), "float64", b"")), producer="tracker"),
        _envelope(
            "value_everything",
            {"neg": -5, "big": 2**62, "raw": b"\x00\xff", "nested": [[1.5, None], {"k": True}]},
            seq=2**40,
        ),
        _envelope(
            "eos_count",
            None,
            type=EOS,
            trace_id="eos-r1",
            seq=1000,
            replica_id=1,
        ),
        _envelope(
            "abort_with_error",
            None,
            type=ABORT,
            trace_id="abort-r0",
            error=ErrorInfo(
                code="VF_POISON_DECODE",
                message="payload does not parse",
                remedy="fix the producer",
                disposition="poison",
                node="camera",
                trace_id="camera:0a1b2c3d4e5f:7",
                num_delivered=4,
                context={"stream_seq": "17"},
            ),
        ),
    ]
