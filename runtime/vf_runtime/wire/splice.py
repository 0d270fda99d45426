"""Wire bytes for payloads that hold large byte strings, without copying them through protobuf.

Building a protobuf message copies each bytes field into the message and
serialising copies it again, in fresh memory each time; for a video frame that is
most of what encoding costs. A length-delimited protobuf field is its tag, its
length and its bytes, so a payload whose large leaves are written as pieces of
their own and joined once is, byte for byte, what protobuf writes (the wire tests
compare the two). Everything that is not a large leaf is still serialised by protobuf.
"""

from __future__ import annotations

from typing import Any

from vf_runtime.wire import envelope_pb2 as pb
from vf_runtime.wire.payloads import Frame, Tensor, array_bytes, is_ndarray

LARGE = 64 * 1024  # leaves at least this long are spliced in instead of copied

Piece = bytes | memoryview
Parts = tuple[list[Piece], int]  # the pieces of an encoding, and their total length


def varint(number: int) -> bytes:
    out = bytearray()
    while number > 0x7F:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def _field(number: int, parts: Parts) -> Parts:
    """A length-delimited field ``number`` around an encoding."""
    pieces, size = parts
    head = varint(number << 3 | 2) + varint(size)
    return [head, *pieces], len(head) + size


def has_large(obj: Any) -> bool:
    """Whether a plain value holds a bytes leaf or tensor of at least ``LARGE`` bytes."""
    kind = type(obj)
    if kind is bytes or kind is bytearray:
        return len(obj) >= LARGE
    if kind is Tensor:
        return len(obj.data) >= LARGE
    if is_ndarray(obj):
        return int(obj.nbytes) >= LARGE
    if kind is dict:
        return any(has_large(item) for item in obj.values())
    if kind is list or kind is tuple:
        return any(has_large(item) for item in obj)
    return False


def value_parts(obj: Any, *, small: Any) -> Parts:
    """A ``Value``'s encoding; ``small(obj)`` serialises the parts without large leaves."""
    kind = type(obj)
    if kind is bytes or kind is bytearray:
        if len(obj) >= LARGE:
            return _field(5, ([bytes(obj)], len(obj)))
    elif kind is Tensor:
        if len(obj.data) >= LARGE:
            return _field(9, tensor_parts(obj))
    elif is_ndarray(obj):
        if int(obj.nbytes) >= LARGE:
            return _field(9, array_parts(obj))
    elif kind is dict:
        if has_large(obj) and all(type(key) is str for key in obj):
            return _field(8, _entries(obj, small=small))
    elif (kind is list or kind is tuple) and has_large(obj):
        pieces: list[Piece] = []
        size = 0
        for item in obj:
            more, extra = _field(1, value_parts(item, small=small))
            pieces += more
            size += extra
        return _field(7, (pieces, size))
    data: bytes = small(obj)
    return [data], len(data)


def _entries(mapping: dict[str, Any], *, small: Any) -> Parts:
    """A ``MapValue``: one ``MapEntry`` per item, in the mapping's order."""
    pieces: list[Piece] = []
    size = 0
    for key, item in mapping.items():
        entry, entry_size = _field(2, value_parts(item, small=small))
        name = key.encode("utf-8")
        if name:  # proto3 leaves an empty string out
            key_field = varint(1 << 3 | 2) + varint(len(name)) + name
            entry, entry_size = [key_field, *entry], entry_size + len(key_field)
        more, extra = _field(1, (entry, entry_size))
        pieces += more
        size += extra
    return pieces, size


def tensor_parts(tensor: Tensor) -> Parts:
    """A ``Tensor``: shape and dtype through protobuf, then the element bytes (field 3)."""
    head = pb.Tensor(shape=tensor.shape, dtype=tensor.dtype).SerializeToString()
    if not tensor.data:
        return [head], len(head)
    data = tensor.data if type(tensor.data) is bytes else bytes(tensor.data)
    pieces, size = _field(3, ([data], len(data)))
    return [head, *pieces], len(head) + size


def array_parts(array: Any) -> Parts:
    """A numpy array as a ``Tensor``, its element bytes a view of the array: joining the
    parts is then the only copy of them."""
    shape, dtype, data = array_bytes(array)
    head = pb.Tensor(shape=shape, dtype=dtype).SerializeToString()
    if not data.nbytes:
        return [head], len(head)
    pieces, size = _field(3, ([data], data.nbytes))
    return [head, *pieces], len(head) + size


def _varint_at(data: bytes, at: int) -> tuple[int, int]:
    number = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("truncated varint")
        byte = data[at]
        number |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if byte < 0x80:
            return number, at


def tensor_data_span(data: bytes) -> tuple[int, int, int] | None:
    """Where a serialised ``Tensor``'s element bytes (field 3) lie, as (where the field's
    tag starts, where its bytes start, where they end), when the field occurs once and
    every field is well formed; None sends the caller to protobuf."""
    spans: list[tuple[int, int, int]] = []
    at = 0
    try:
        while at < len(data):
            field = at
            tag, at = _varint_at(data, at)
            wire = tag & 7
            if wire == 0:
                _, at = _varint_at(data, at)
                continue
            if wire != 2:
                return None
            length, at = _varint_at(data, at)
            if at + length > len(data):
                return None
            if tag >> 3 == 3:
                spans.append((field, at, at + length))
            at += length
    except ValueError:
        return None
    return spans[0] if len(spans) == 1 else None


def frame_parts(frame: Frame) -> Parts:
    """A ``Frame``: its pixels (field 1) spliced, then format and capture time."""
    pieces, size = _field(1, tensor_parts(frame.pixels))
    rest = pb.Frame(pixel_format=frame.pixel_format)
    if frame.capture_ts is not None:
        rest.capture_ts = frame.capture_ts
    tail = rest.SerializeToString()
    return [*pieces, tail], size + len(tail)
