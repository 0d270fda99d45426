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


TENSOR_KINDS = frozenset("biufc")  # bool, signed, unsigned, float, complex


class UnsupportedDtype(TypeError):
    """A numpy array whose dtype has no exact tensor form (unicode, objects, records…)."""

    code = "VF_WIRE_DTYPE"


@dataclass(frozen=True)
class Tensor:
    """An n-dimensional array: its shape, numpy dtype name and C-contiguous bytes."""

    shape: tuple[int, ...]
    dtype: str
    data: bytes

    @classmethod
    def from_array(cls, array: Any) -> Tensor:
        """Copy a numpy array (any layout, any byte order) into a little-endian Tensor.

        Only booleans, integers, floats and complex numbers have a dtype name that says
        everything about their bytes; other arrays (unicode, bytes, objects, records,
        dates) are refused with :class:`UnsupportedDtype` rather than sent mislabelled.
        """
        shape, dtype, contiguous = _little_c_order(array)
        return cls(shape=shape, dtype=dtype, data=contiguous.tobytes())

    def to_numpy(self) -> Any:
        """The tensor as a read-only numpy array (needs numpy installed); the wire's
        bytes are little-endian whatever the machine."""
        import numpy

        dtype = numpy.dtype(self.dtype).newbyteorder("<")
        return numpy.frombuffer(self.data, dtype=dtype).reshape(self.shape)


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


def _little_c_order(array: Any) -> tuple[tuple[int, ...], str, Any]:
    """Shape, dtype name and a C-ordered little-endian form of ``array``: the array itself
    when it already is one. Refuses dtypes without an exact tensor form."""
    import numpy

    dtype = array.dtype
    if dtype.kind not in TENSOR_KINDS or dtype.fields is not None or dtype.subdtype:
        raise UnsupportedDtype(
            f"a numpy array of dtype {dtype.str!r} ({dtype.name}) cannot travel as a "
            "tensor: only bool, integer, float and complex arrays have an exact wire "
            "form; convert it (e.g. unicode to a list of str) before returning it"
        )
    little = dtype.newbyteorder("<")
    contiguous = numpy.asarray(array, dtype=little, order="C")  # keeps 0-d arrays 0-d
    return tuple(int(n) for n in contiguous.shape), str(little.name), contiguous


def array_bytes(array: Any) -> tuple[tuple[int, ...], str, memoryview]:
    """What :meth:`Tensor.from_array` would hold, with the element bytes as a view of the
    array (no copy when it is C-ordered and little-endian already)."""
    import numpy

    shape, dtype, contiguous = _little_c_order(array)
    return shape, dtype, memoryview(contiguous.reshape(-1).view(numpy.uint8))
