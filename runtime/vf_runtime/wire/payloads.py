"""The payload types a vf envelope carries besides plain values.

Tensors decode to :class:`Tensor` (no numpy needed); a node that has numpy can ask
for arrays. Payload types vf does not know stay :class:`RawPayload`: opaque bytes
that are forwarded untouched and never deserialised.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TENSOR = "videoflow.v1.Tensor"
VALUE = "videoflow.v1.Value"
FRAME = "videoflow.v1.Frame"
DETECTIONS = "videoflow.v1.Detections"
TRACKS = "videoflow.v1.Tracks"
BLOB_REF = "videoflow.v1.BlobRef"


@dataclass(frozen=True)
class Tensor:
    """An n-dimensional array: its shape, numpy dtype name and C-contiguous bytes."""

    shape: tuple[int, ...]
    dtype: str
    data: bytes

    @classmethod
    def from_array(cls, array: Any) -> Tensor:
        """Copy a numpy array (any layout) into a Tensor."""
        import numpy

        contiguous = numpy.ascontiguousarray(array)
        if contiguous.dtype.hasobject:
            raise TypeError("arrays of Python objects cannot travel as tensors")
        return cls(
            shape=tuple(int(n) for n in contiguous.shape),
            dtype=str(contiguous.dtype.name),
            data=contiguous.tobytes(),
        )

    def to_numpy(self) -> Any:
        """The tensor as a read-only numpy array (needs numpy installed)."""
        import numpy

        return numpy.frombuffer(self.data, dtype=numpy.dtype(self.dtype)).reshape(self.shape)


@dataclass(frozen=True)
class Frame:
    """An image: its pixels, their format (bgr8, rgb8, gray8) and the capture time."""

    pixels: Tensor
    pixel_format: str = "bgr8"
    capture_ts: float | None = None


@dataclass(frozen=True)
class Detections:
    """Bounding boxes (N x 6: x1, y1, x2, y2, score, class) and the class names."""

    boxes: Tensor
    class_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tracks:
    """Tracked objects, one row per track."""

    tracks: Tensor


@dataclass(frozen=True)
class RawPayload:
    """A payload of a type vf does not decode: forwarded byte for byte."""

    payload_type: str
    data: bytes


@dataclass(frozen=True)
class BlobRef:
    """Where an offloaded payload lives: a payload-store key, its real type and size."""

    ref: str
    inner_payload_type: str
    size: int


def is_ndarray(value: object) -> bool:
    """True for numpy arrays, without importing numpy."""
    kind = type(value)
    return kind.__module__ == "numpy" and kind.__name__ == "ndarray"


def is_numpy_scalar(value: object) -> bool:
    kind = type(value)
    return kind.__module__ == "numpy" and hasattr(value, "item") and not is_ndarray(value)
