"""Spliced encodings of large payloads are byte-for-byte what protobuf writes."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vf_runtime.wire import Frame, Tensor, decode_payload, encode_payload, splice
from vf_runtime.wire.payloads import TENSOR

tensors = st.builds(
    Tensor,
    shape=st.lists(st.integers(0, 2**40), max_size=4).map(tuple),
    dtype=st.sampled_from(["", "uint8", "float32"]),
    data=st.binary(max_size=24),
)
leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=24)
    | tensors
)
values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
frames = st.builds(
    Frame,
    pixels=tensors,
    pixel_format=st.sampled_from(["", "bgr8", "gray8"]),
    capture_ts=st.none() | st.floats(allow_nan=False),
)


def _both(obj: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[tuple[str, bytes], tuple[str, bytes]]:
    """The encoding with every leaf spliced, and the one protobuf writes on its own."""
    with monkeypatch.context() as patch:
        patch.setattr(splice, "LARGE", 0)
        spliced = encode_payload(obj)
    with monkeypatch.context() as patch:
        patch.setattr(splice, "LARGE", 1 << 62)
        plain = encode_payload(obj)
    return spliced, plain


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(obj=values | frames)
def test_a_spliced_payload_is_what_protobuf_writes(obj: Any) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        spliced, plain = _both(obj, monkeypatch)
    assert spliced == plain


def test_a_large_frame_and_map_take_the_spliced_path_and_decode_back() -> None:
    pixels = Tensor(shape=(512, 512, 3), dtype="uint8", data=bytes(range(256)) * 3072)
    frame = Frame(pixels=pixels, pixel_format="rgb8", capture_ts=12.5)
    item = {"i": 7, "frame": b"\x01" * (splice.LARGE + 1), "tags": ["a", {"": b"\x02" * 70000}]}
    assert splice.has_large(item)
    for obj in (frame, item, pixels):
        payload_type, data = encode_payload(obj)
        assert decode_payload(payload_type, data) == obj


ARRAYS = [
    numpy.arange(24, dtype="<f4").reshape(2, 3, 4),
    numpy.arange(24, dtype=">i4").reshape(4, 6),  # big-endian: converted, as before
    numpy.arange(60, dtype="u1").reshape(3, 4, 5)[:, ::2, 1:],  # not contiguous
    numpy.asfortranarray(numpy.arange(12, dtype="f8").reshape(3, 4)),
    numpy.array([True, False, True]),
    numpy.arange(6, dtype="c16"),
    numpy.zeros((0, 3), dtype="u2"),
    numpy.array(3.5),  # 0-d
]


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: f"{a.dtype.str}{a.shape}")
def test_a_large_array_is_encoded_as_its_tensor_and_decodes_back(
    array: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spliced straight from the array, the bytes are what the tensor path writes."""
    tensor = Tensor.from_array(array)
    for obj, wrapped in ((array, tensor), ({"k": array, "i": 1}, {"k": tensor, "i": 1})):
        (spliced_type, spliced), plain = _both(obj, monkeypatch)
        assert (spliced_type, spliced) == plain == encode_payload(wrapped)
        with monkeypatch.context() as patch:
            patch.setattr(splice, "LARGE", 0)
            back = decode_payload(spliced_type, spliced)
        assert back == decode_payload(*plain) == wrapped


@settings(max_examples=200, deadline=None)
@given(tensor=tensors)
def test_a_sliced_tensor_decodes_as_protobuf_decodes_it(tensor: Tensor) -> None:
    payload_type, data = encode_payload(tensor)
    plain = decode_payload(payload_type, data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(splice, "LARGE", 0)
        assert decode_payload(payload_type, data) == plain == tensor


def test_a_tensor_that_repeats_its_data_decodes_as_protobuf_says() -> None:
    """Protobuf keeps the last of a repeated bytes field; the slicing decoder defers to it."""
    first = encode_payload(Tensor(shape=(2,), dtype="uint8", data=b"ab"))[1]
    data = first + splice.varint(3 << 3 | 2) + splice.varint(2) + b"cd"
    assert splice.tensor_data_span(data) is None
    assert decode_payload(TENSOR, data).data == b"cd"


COPIES = """
import ctypes, resource
ctypes.CDLL("libc.so.6").mallopt(-3, 128 * 1024)  # frame-sized buffers: fresh mmaps
import numpy
from vf_runtime.wire import decode_payload, encode_payload
frame = numpy.ones((1080, 1920, 3), dtype=numpy.uint8)
def faults(step):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    kept = step()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
kind, data = encode_payload(frame)
decode_payload(kind, data, arrays=True)
one = min(faults(lambda: bytes(memoryview(frame))) for _ in range(3))
print(min(faults(lambda: encode_payload(frame)) for _ in range(3)) / one)
print(min(faults(lambda: decode_payload(kind, data, arrays=True)) for _ in range(3)) / one)
"""


def test_a_frame_is_copied_once_when_encoded_and_once_when_decoded() -> None:
    """Page faults of fresh frame-sized buffers, in units of one plain copy of the frame."""
    done = subprocess.run(
        [sys.executable, "-c", COPIES], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    encoded, decoded = (float(line) for line in done.stdout.split())
    assert encoded < 1.5, encoded
    assert decoded < 1.5, decoded
