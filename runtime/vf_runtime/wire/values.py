"""Python values to and from the envelope's ``Value`` union, and the known payloads.

Encoding rules: ``bool`` is checked before ``int`` (Value keeps booleans, 64-bit
integers and doubles apart); tuples become lists; map keys must be strings; a
numpy array or :class:`Tensor` nested anywhere becomes a tensor value. Decoding
keeps the order map entries had on the wire so a value re-encodes to the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from google.protobuf.message import Message

from vf_runtime.wire import envelope_pb2 as pb
from vf_runtime.wire import splice
from vf_runtime.wire.payloads import (
    BLOB_REF,
    DETECTIONS,
    FRAME,
    TENSOR,
    TRACKS,
    VALUE,
    BlobRef,
    Detections,
    Frame,
    RawPayload,
    Tensor,
    Tracks,
    UnsupportedDtype,
    is_ndarray,
    is_numpy_scalar,
)

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class WireError(ValueError):
    """Bytes that are not a vf v4 envelope, or a value that cannot be encoded as one."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def tensor_to_pb(tensor: Tensor) -> pb.Tensor:
    return pb.Tensor(shape=tensor.shape, dtype=tensor.dtype, data=tensor.data)


def tensor_from_pb(message: pb.Tensor, *, arrays: bool) -> Any:
    tensor = Tensor(shape=tuple(message.shape), dtype=message.dtype, data=message.data)
    return tensor.to_numpy() if arrays else tensor


def as_tensor(value: Any) -> Tensor:
    if isinstance(value, Tensor):
        return value
    try:
        return Tensor.from_array(value)
    except UnsupportedDtype as exc:
        raise WireError(exc.code, str(exc)) from exc


def fill_value(target: pb.Value, obj: Any, *, tensors: bool = True) -> None:
    """Write ``obj`` into an empty ``Value`` in place (no nested message is copied)."""
    kind = type(obj)
    if kind is str:
        target.string_value = obj
    elif kind is float:
        target.double_value = obj
    elif kind is int:
        if not INT64_MIN <= obj <= INT64_MAX:
            raise WireError("VF_WIRE_VALUE", f"integer {obj} does not fit in 64 bits")
        target.int_value = obj
    elif kind is bytes:
        target.bytes_value = obj
    elif kind is dict:
        _fill_map(target.map_value, obj, tensors=tensors)
    elif kind is bool:
        target.bool_value = obj
    elif obj is None:
        target.null_value = pb.NULL_VALUE
    else:
        _fill_other(target, obj, tensors=tensors)


def _fill_other(target: pb.Value, obj: Any, *, tensors: bool) -> None:
    """Subclasses of the plain types, sequences, mappings, tensors and numpy scalars."""
    # Order matters: bool is an int subclass and must be recognised first.
    if isinstance(obj, bool):
        target.bool_value = obj
    elif isinstance(obj, int):
        fill_value(target, int(obj), tensors=tensors)
    elif isinstance(obj, float):
        target.double_value = obj
    elif isinstance(obj, str):
        target.string_value = obj
    elif isinstance(obj, bytes | bytearray | memoryview):
        target.bytes_value = bytes(obj)
    elif isinstance(obj, list | tuple):
        values = target.list_value
        values.SetInParent()
        for item in obj:
            fill_value(values.values.add(), item, tensors=tensors)
    elif isinstance(obj, Mapping):
        _fill_map(target.map_value, obj, tensors=tensors)
    elif isinstance(obj, Tensor) or is_ndarray(obj):
        if not tensors:
            raise WireError("VF_WIRE_VALUE", "metadata values cannot be tensors")
        target.tensor_value.CopyFrom(tensor_to_pb(as_tensor(obj)))
    elif is_numpy_scalar(obj):
        fill_value(target, obj.item(), tensors=tensors)
    else:
        raise WireError(
            "VF_WIRE_VALUE",
            f"cannot encode a {type(obj).__name__}: use None, bool, int, float, str, bytes, "
            "lists, str-keyed dicts, tensors or a protobuf message",
        )


def _fill_map(target: pb.MapValue, mapping: Mapping[Any, Any], *, tensors: bool) -> None:
    target.SetInParent()
    fill_entries(target.fields, mapping, tensors=tensors)


def fill_entries(entries: Any, mapping: Mapping[Any, Any], *, tensors: bool) -> None:
    """Append ``mapping``'s items, in its order, to a repeated ``MapEntry`` field."""
    for key, item in mapping.items():
        if type(key) is not str and not isinstance(key, str):
            raise WireError("VF_WIRE_VALUE", f"map key {key!r} is not a string")
        entry = entries.add()
        entry.key = key
        fill_value(entry.value, item, tensors=tensors)


_PLAIN_KINDS = frozenset(["string_value", "double_value", "int_value", "bytes_value", "bool_value"])


def from_value(value: pb.Value, *, arrays: bool = False) -> Any:
    """A ``Value`` as a Python value (maps keep their wire order)."""
    kind = value.WhichOneof("kind")
    if kind in _PLAIN_KINDS:  # the most common leaves first
        return getattr(value, kind)
    if kind is None or kind == "null_value":
        return None
    if kind == "list_value":
        return [from_value(v, arrays=arrays) for v in value.list_value.values]
    if kind == "map_value":
        return {e.key: from_value(e.value, arrays=arrays) for e in value.map_value.fields}
    if kind == "tensor_value":
        return tensor_from_pb(value.tensor_value, arrays=arrays)
    return getattr(value, kind)


def _frame_pb(obj: Frame) -> Message:
    frame = pb.Frame(pixels=tensor_to_pb(obj.pixels), pixel_format=obj.pixel_format)
    if obj.capture_ts is not None:
        frame.capture_ts = obj.capture_ts
    return frame


_ENCODERS: tuple[tuple[type, str, Callable[[Any], Message]], ...] = (
    (Tensor, TENSOR, tensor_to_pb),
    (Frame, FRAME, _frame_pb),
    (
        Detections,
        DETECTIONS,
        lambda d: pb.Detections(boxes=tensor_to_pb(d.boxes), class_names=d.class_names),
    ),
    (Tracks, TRACKS, lambda t: pb.Tracks(tracks=tensor_to_pb(t.tracks))),
    (
        BlobRef,
        BLOB_REF,
        lambda r: pb.BlobRef(ref=r.ref, inner_payload_type=r.inner_payload_type, size=r.size),
    ),
)


def encode_payload(obj: Any) -> tuple[str, bytes]:
    """A node's output as ``(payload_type, bytes)``."""
    if type(obj) is dict and not splice.has_large(obj):  # the common case, decided at once
        return VALUE, _serialized_value(obj)
    if isinstance(obj, RawPayload):
        return obj.payload_type, obj.data
    if is_ndarray(obj) and int(obj.nbytes) < splice.LARGE:
        obj = as_tensor(obj)
    spliced = _spliced(obj)
    if spliced is not None:
        return spliced
    for kind, payload_type, build in _ENCODERS:
        if isinstance(obj, kind):
            return payload_type, bytes(build(obj).SerializeToString())
    if isinstance(obj, Message):
        return str(obj.DESCRIPTOR.full_name), bytes(obj.SerializeToString())
    return VALUE, _serialized_value(obj)


def _spliced(obj: Any) -> tuple[str, bytes] | None:
    """Payloads with large byte strings, encoded without copying those through protobuf."""
    kind = type(obj)
    if is_ndarray(obj):  # a large one: its bytes are joined straight from the array
        return TENSOR, b"".join(splice.array_parts(obj)[0])
    if kind is Tensor and len(obj.data) >= splice.LARGE:
        return TENSOR, b"".join(splice.tensor_parts(obj)[0])
    if kind is Frame and len(obj.pixels.data) >= splice.LARGE:
        return FRAME, b"".join(splice.frame_parts(obj)[0])
    if not splice.has_large(obj):
        return None
    try:
        parts, _ = splice.value_parts(obj, small=_serialized_value)
    except UnicodeEncodeError:
        return None  # the general path reports it
    return VALUE, b"".join(parts)


def _serialized_value(obj: Any) -> bytes:
    value = pb.Value()
    fill_value(value, obj)
    return bytes(value.SerializeToString())


def decode_payload(payload_type: str, data: bytes, *, arrays: bool = False) -> Any:
    """The Python value of a payload; unknown types come back as :class:`RawPayload`."""
    if payload_type == "" and not data:
        return None
    decoder = _DECODERS.get(payload_type)
    if decoder is None:
        return RawPayload(payload_type=payload_type, data=data)
    try:
        return decoder(data, arrays)
    except WireError:
        raise
    except Exception as exc:
        raise WireError("VF_WIRE_PAYLOAD", f"{payload_type} payload does not parse: {exc}") from exc


def _tensor(message: pb.Tensor) -> Tensor:
    return Tensor(shape=tuple(message.shape), dtype=message.dtype, data=message.data)


def _decode_tensor(data: bytes, arrays: bool) -> Any:
    """A ``Tensor`` payload; a large one's element bytes are sliced out of ``data`` once
    instead of being copied into a protobuf message and out again."""
    span = splice.tensor_data_span(data) if len(data) >= splice.LARGE else None
    if span is None:
        return tensor_from_pb(pb.Tensor.FromString(data), arrays=arrays)
    field, start, end = span
    head = pb.Tensor.FromString(data[:field] + data[end:])
    tensor = Tensor(shape=tuple(head.shape), dtype=head.dtype, data=data[start:end])
    return tensor.to_numpy() if arrays else tensor


def _decode_frame(data: bytes, _arrays: bool) -> Frame:
    frame = pb.Frame.FromString(data)
    capture = frame.capture_ts if frame.HasField("capture_ts") else None
    return Frame(pixels=_tensor(frame.pixels), pixel_format=frame.pixel_format, capture_ts=capture)


def _decode_detections(data: bytes, _arrays: bool) -> Detections:
    found = pb.Detections.FromString(data)
    return Detections(boxes=_tensor(found.boxes), class_names=tuple(found.class_names))


def _decode_blob_ref(data: bytes, _arrays: bool) -> BlobRef:
    ref = pb.BlobRef.FromString(data)
    return BlobRef(ref=ref.ref, inner_payload_type=ref.inner_payload_type, size=ref.size)


_DECODERS: dict[str, Callable[[bytes, bool], Any]] = {
    VALUE: lambda data, arrays: from_value(pb.Value.FromString(data), arrays=arrays),
    TENSOR: _decode_tensor,
    FRAME: _decode_frame,
    DETECTIONS: _decode_detections,
    TRACKS: lambda data, _arrays: Tracks(tracks=_tensor(pb.Tracks.FromString(data).tracks)),
    BLOB_REF: _decode_blob_ref,
}
