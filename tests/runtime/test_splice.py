"""Spliced encodings of large payloads are byte-for-byte what protobuf writes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vf_runtime.wire import Frame, Tensor, decode_payload, encode_payload, splice

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
