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
from vf_runtime.wire.payloads import Frame, Tensor

LARGE = 64 * 1024  # leaves at least this long are spliced in instead of copied

Parts = tuple[list[bytes], int]  # the pieces of an encoding, and their total length


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
    elif kind is dict:
        if has_large(obj) and all(type(key) is str for key in obj):
            return _field(8, _entries(obj, small=small))
    elif (kind is list or kind is tuple) and has_large(obj):
        pieces: list[bytes] = []
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
    pieces: list[bytes] = []
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


def frame_parts(frame: Frame) -> Parts:
    """A ``Frame``: its pixels (field 1) spliced, then format and capture time."""
    pieces, size = _field(1, tensor_parts(frame.pixels))
    rest = pb.Frame(pixel_format=frame.pixel_format)
    if frame.capture_ts is not None:
        rest.capture_ts = frame.capture_ts
    tail = rest.SerializeToString()
    return [*pieces, tail], size + len(tail)
