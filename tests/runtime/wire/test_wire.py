"""The v4 envelope: conformance vectors (vf's own from PROTOCOL.md, and videoflow's), vf's own
goldens, and refusals."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.wirecases import GOLDEN, REPO, VECTORS, tagged, vf_cases
from tests.runtime.wirespec import (
    OWN_VECTORS,
    envelope_entries,
    expected_files,
    reject_entries,
)
from tests.support import require
from vf_runtime.wire import (
    TENSOR,
    VALUE,
    Envelope,
    RawPayload,
    Tensor,
    WireError,
    decode_envelope,
    decode_payload,
    encode_envelope,
    encode_payload,
    message_id,
)

# vf's own vectors, written from PROTOCOL.md (tests/runtime/wirespec.py), always present;
# videoflow's, beside the project, an external cross-check of the same wire.
SETS = {"vf": OWN_VECTORS, "videoflow": VECTORS}


def _folder(name: str) -> Path:
    folder = SETS[name]
    require(
        folder.is_dir(),
        f"videoflow's conformance vectors are absent ({folder.name}/ beside the project)",
    )
    return folder


def _manifest(folder: Path, kind: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads((folder / kind / "manifest.json").read_text())
    return entries


def _payload_notation(envelope: Envelope) -> dict[str, Any]:
    value = decode_payload(envelope.payload_type, envelope.payload)
    if envelope.payload_type == TENSOR:
        return tagged(value)
    if envelope.payload_type == VALUE:
        return {"value": tagged(value)}
    assert envelope.payload_type == "" and value is None
    return {"none": True}


def _cases(kind: str) -> list[tuple[str, str]]:
    """(set, vector) pairs: vf's from what wirespec writes, videoflow's from its manifest."""
    own = envelope_entries() if kind == "envelope" else [e for e, _ in reject_entries()]
    theirs = _manifest(VECTORS, kind) if VECTORS.is_dir() else [{"name": "absent"}]
    return [("vf", e["name"]) for e in own] + [("videoflow", e["name"]) for e in theirs]


def test_own_vectors_are_what_the_specification_writes() -> None:
    """The committed files are wirespec's output; ``VF_WRITE_VECTORS=1`` rewrites them."""
    expected = expected_files()
    if os.environ.get("VF_WRITE_VECTORS") == "1":
        for relative, data in expected.items():
            (OWN_VECTORS / relative).parent.mkdir(parents=True, exist_ok=True)
            (OWN_VECTORS / relative).write_bytes(data)
    on_disk = {
        str(p.relative_to(OWN_VECTORS)): p.read_bytes()
        for p in OWN_VECTORS.rglob("*")
        if p.is_file()
    }
    assert on_disk == expected


@pytest.mark.parametrize(("source", "name"), _cases("envelope"))
def test_vector_decodes_to_its_manifest_values(source: str, name: str) -> None:
    folder = _folder(source)
    entry = next(e for e in _manifest(folder, "envelope") if e["name"] == name)
    envelope = decode_envelope((folder / "envelope" / entry["file"]).read_bytes())
    got = {
        "version": envelope.version,
        "type": envelope.type,
        "producer_name": envelope.producer,
        "flow_id": envelope.flow_id,
        "run_id": envelope.run_id,
        "trace_id": envelope.trace_id,
        "seq": envelope.seq,
        "event_ts": envelope.event_ts,
        "replica_id": envelope.replica_id,
        "metadata": tagged(dict(envelope.metadata)),
        "payload": _payload_notation(envelope),
    }
    expected = {key: entry[key] for key in got}
    assert got == expected


@pytest.mark.parametrize(("source", "name"), _cases("envelope"))
def test_vector_reencodes_byte_identically(source: str, name: str) -> None:
    raw = (_folder(source) / "envelope" / f"{name}.bin").read_bytes()
    envelope = decode_envelope(raw)
    value = decode_payload(envelope.payload_type, envelope.payload)
    payload_type, payload = ("", b"") if value is None else encode_payload(value)
    assert (payload_type, payload) == (envelope.payload_type, envelope.payload)
    rebuilt = Envelope(
        type=envelope.type,
        producer=envelope.producer,
        flow_id=envelope.flow_id,
        run_id=envelope.run_id,
        trace_id=envelope.trace_id,
        seq=envelope.seq,
        event_ts=envelope.event_ts,
        replica_id=envelope.replica_id,
        metadata=dict(envelope.metadata),
        payload_type=payload_type,
        payload=payload,
    )
    assert encode_envelope(rebuilt) == raw


@pytest.mark.parametrize(("source", "name"), _cases("reject"))
def test_reject_vector_is_refused_by_name_or_carried_opaquely(source: str, name: str) -> None:
    folder = _folder(source)
    entry = next(e for e in _manifest(folder, "reject") if e["name"] == name)
    raw = (folder / "reject" / entry["file"]).read_bytes()
    if "reject" in entry["expect"]:
        with pytest.raises(WireError) as caught:
            decode_envelope(raw)
        assert entry["expect"]["reject"]["message_contains"] in str(caught.value)
        assert caught.value.code.startswith("VF_WIRE_")
        return
    envelope = decode_envelope(raw)
    value = decode_payload(envelope.payload_type, envelope.payload)
    expected = entry["expect"]["opaque"]
    assert value == RawPayload(
        payload_type=expected["payload_type"], data=base64.b64decode(expected["data_b64"])
    )
    assert encode_payload(value) == (envelope.payload_type, envelope.payload)


@pytest.mark.parametrize("source", list(SETS))
def test_every_message_id_vector_is_derived(source: str) -> None:
    vectors = json.loads((_folder(source) / "message_id" / "vectors.json").read_text())
    assert vectors
    for vector in vectors:
        derived = message_id(
            flow_id=vector["flow_id"],
            run_id=vector["run_id"],
            producer=vector["producer_name"],
            trace_id=vector["trace_id"],
            seq=vector["seq"],
            msg_type=vector["msg_type"],
        )
        assert derived == vector["expected_id"], vector


def test_the_legacy_msgpack_vector_is_refused_with_its_code() -> None:
    raw = (OWN_VECTORS / "reject" / "legacy_msgpack.bin").read_bytes()
    with pytest.raises(WireError) as caught:
        decode_envelope(raw)
    assert caught.value.code == "VF_WIRE_LEGACY"


@pytest.mark.parametrize("name", [name for name, _ in vf_cases()])
def test_vf_golden_envelopes_are_stable(name: str) -> None:
    envelope = dict(vf_cases())[name]
    golden = (GOLDEN / f"{name}.bin").read_bytes()
    assert encode_envelope(envelope) == golden
    assert decode_envelope(golden) == envelope


def test_golden_folder_holds_only_known_cases() -> None:
    on_disk = sorted(p.stem for p in GOLDEN.glob("*.bin"))
    assert on_disk == sorted(name for name, _ in vf_cases())


def test_message_id_is_32_hex_of_sha256_over_the_identity() -> None:
    expected = hashlib.sha256(b"f:r:p:t:3:data").hexdigest()[:32]
    got = message_id(flow_id="f", run_id="r", producer="p", trace_id="t", seq=3, msg_type="data")
    assert got == expected
    other = message_id(flow_id="f", run_id="r", producer="p", trace_id="t", seq=3, msg_type="eos")
    assert other != got


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"", "VF_WIRE_EMPTY"),
        (b"\x83\xa1v\x03", "VF_WIRE_LEGACY"),
        (b"\xde\x00\x01", "VF_WIRE_LEGACY"),
        (b"\x08\x03\x10\x01", "VF_WIRE_VERSION"),
        (b"\x08\x04\x10\x07", "VF_WIRE_TYPE"),
        (b"\x0a\xff\xff", "VF_WIRE_DECODE"),
    ],
)
def test_bad_bytes_are_refused_with_a_code(data: bytes, code: str) -> None:
    with pytest.raises(WireError) as caught:
        decode_envelope(data)
    assert caught.value.code == code


def test_values_keep_ints_doubles_and_bools_apart() -> None:
    payload_type, data = encode_payload([1, 1.0, True, None, "x", b"y", {"k": (2,)}])
    assert payload_type == VALUE
    decoded = decode_payload(payload_type, data)
    assert decoded == [1, 1.0, True, None, "x", b"y", {"k": [2]}]
    assert [type(v) for v in decoded[:3]] == [int, float, bool]


@pytest.mark.parametrize("bad", [{1: "int key"}, object(), 2**64, {1.5}])
def test_unencodable_payloads_are_refused(bad: Any) -> None:
    with pytest.raises(WireError):
        encode_payload(bad)


def test_metadata_cannot_carry_tensors() -> None:
    envelope = Envelope(
        type="data",
        producer="p",
        flow_id="f",
        run_id="r",
        trace_id="t",
        seq=1,
        metadata={"t": Tensor((1,), "uint8", b"\x00")},
    )
    with pytest.raises(WireError):
        encode_envelope(envelope)


def test_malformed_known_payload_is_a_wire_error() -> None:
    with pytest.raises(WireError) as caught:
        decode_payload(TENSOR, b"\x0a\xff")
    assert caught.value.code == "VF_WIRE_PAYLOAD"


def test_committed_generated_code_matches_the_proto() -> None:
    proto = REPO / "proto" / "videoflow" / "v1" / "envelope.proto"
    recorded = (REPO / "runtime" / "vf_runtime" / "wire" / "PROTO_SHA256").read_text().strip()
    assert hashlib.sha256(proto.read_bytes()).hexdigest() == recorded, (
        "proto/videoflow/v1/envelope.proto changed: run scripts/gen-proto and commit the result"
    )


_NUMERIC = ("?", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16")
_SHAPES = ((), (0,), (3,), (2, 3), (2, 3, 2))


@pytest.mark.parametrize("order", ["<", ">", "="])
@pytest.mark.parametrize("code", _NUMERIC)
def test_numpy_arrays_of_every_numeric_dtype_and_byte_order_round_trip_exactly(
    code: str, order: str
) -> None:
    numpy = pytest.importorskip("numpy", reason="numpy is optional for the runtime")
    dtype = numpy.dtype(order + code) if code != "?" else numpy.dtype(code)
    for shape in _SHAPES:
        count = int(numpy.prod(shape)) if shape else 1
        values = (numpy.arange(count) * 257 + 1).reshape(shape)
        array = values.astype(dtype)
        for source in (array, array.T):  # C-contiguous and not
            payload_type, data = encode_payload(source)
            back = decode_payload(payload_type, data, arrays=True)
            assert back.dtype == dtype.newbyteorder("<"), (dtype, back.dtype)
            assert back.dtype.byteorder in ("<", "|") or back.dtype.isnative
            assert numpy.array_equal(back, source), (dtype, shape)
            tensor = decode_payload(payload_type, data)
            assert (
                tensor.data
                == numpy.ascontiguousarray(source, dtype=dtype.newbyteorder("<")).tobytes()
            )


def test_a_big_endian_array_is_sent_little_endian_with_its_values() -> None:
    numpy = pytest.importorskip("numpy", reason="numpy is optional for the runtime")
    payload_type, data = encode_payload(numpy.array([1, 2, 258], dtype=">i4"))
    tensor = decode_payload(payload_type, data)
    assert tensor.dtype == "int32"
    assert tensor.data == (1).to_bytes(4, "little") + (2).to_bytes(4, "little") + (258).to_bytes(
        4, "little"
    )
    assert list(decode_payload(payload_type, data, arrays=True)) == [1, 2, 258]


@pytest.mark.parametrize(
    "dtype", ["<U3", "S4", "O", "M8[s]", "m8[s]", [("a", "<i4"), ("b", "<f8")]]
)
def test_arrays_without_an_exact_tensor_form_are_refused_by_name(dtype: Any) -> None:
    numpy = pytest.importorskip("numpy", reason="numpy is optional for the runtime")
    array = numpy.zeros(3, dtype=dtype)
    with pytest.raises(WireError) as caught:
        encode_payload(array)
    assert caught.value.code == "VF_WIRE_DTYPE"
    with pytest.raises(WireError):
        encode_payload({"nested": array})
