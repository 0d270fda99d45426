"""``vf debug decode``: envelopes in every form a user has them, garbage by name, and
offloaded payloads resolved from a real payload store."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

import pytest
from redis import Redis

from tests.runtime.opshelp import vf
from vf_runtime.local.infra import LocalServer, free_port
from vf_runtime.wire import BLOB_REF, DATA, Envelope, Tensor, encode_envelope, encode_payload
from vf_runtime.wire import envelope_pb2 as pb


def _envelope(value: object, **fields: object) -> bytes:
    payload_type, data = encode_payload(value)
    base: dict[str, object] = {
        "type": DATA,
        "producer": "cam",
        "flow_id": "f",
        "run_id": "r",
        "trace_id": "cam:7",
        "seq": 7,
        "metadata": {"camera": "north"},
        "payload_type": payload_type,
        "payload": data,
    }
    return encode_envelope(Envelope(**{**base, **fields}))  # type: ignore[arg-type]


def _decode(*args: str, stdin: bytes | None = None) -> dict[str, object]:
    done = vf("debug", "decode", *args, "--format", "json", stdin=stdin)
    assert done.code == 0, done.err
    found: dict[str, object] = done.json()
    return found


def test_every_input_form_gives_the_same_envelope(tmp_path: Path) -> None:
    wire = _envelope({"i": 3, "tags": list(range(20))})
    (tmp_path / "raw.bin").write_bytes(wire)
    record = json.dumps({"data_b64": base64.b64encode(wire).decode()}).encode()
    forms = {
        "raw": _decode(str(tmp_path / "raw.bin")),
        "hex": _decode("-", stdin=wire.hex().encode() + b"\n"),
        "base64": _decode("-", stdin=base64.b64encode(wire)),
        "json": _decode("-", stdin=record),
    }
    assert all(found == forms["raw"] for found in forms.values()), forms
    raw = forms["raw"]
    assert (raw["producer"], raw["trace_id"], raw["seq"]) == ("cam", "cam:7", 7)
    assert raw["metadata"] == {"camera": "north"}
    payload = raw["payload"]
    assert isinstance(payload, dict) and payload["i"] == 3
    assert payload["tags"][-1] == "... 12 more", "a long list is not bounded"


def test_a_tensor_is_shown_as_dtype_shape_and_first_values() -> None:
    values = struct.pack("<6f", 1.5, 2, 3, 4, 5, 6)
    tensor = Tensor(shape=(2, 3), dtype="float32", data=values)
    found = _decode("-", stdin=_envelope(tensor))
    assert found["payload"] == "float32[2, 3] = [1.5, 2.0, 3.0, 4.0, 5.0, 6.0]"
    text = vf("debug", "decode", "-", stdin=_envelope(tensor))
    assert "payload: float32[2, 3]" in text.out


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"", "VF_WIRE_EMPTY"),
        (b"\x82\xa1a\x01", "VF_WIRE_LEGACY"),
        (b"\xff\xff\xff", "VF_WIRE_DECODE"),
        (b"garbage", "VF_WIRE_DECODE"),
    ],
    ids=["empty", "msgpack", "corrupt", "text"],
)
def test_undecodable_bytes_get_the_workers_reason_by_name(data: bytes, code: str) -> None:
    done = vf("debug", "decode", "-", stdin=data)
    assert done.code == 2 and f"error[{code}]" in done.err and "Traceback" not in done.err


def test_a_wrong_version_and_bad_inputs_are_named() -> None:
    message = pb.Envelope.FromString(_envelope(1))
    message.v = 3
    old = vf("debug", "decode", "-", stdin=message.SerializeToString())
    assert old.code == 2 and "error[VF_WIRE_VERSION]" in old.err
    missing = vf("debug", "decode", "/no/such/file")
    neither = vf("debug", "decode")
    bad_hex = vf("debug", "decode", "-", "--encoding", "hex", stdin=b"zz")
    assert missing.code == 2 and "error[VF_DECODE_INPUT]" in missing.err
    assert neither.code == 2 and "error[VF_DECODE_INPUT]" in neither.err
    assert bad_hex.code == 2 and "error[VF_DECODE_INPUT]" in bad_hex.err


def test_an_offloaded_payload_is_resolved_only_with_redis(redis_server: LocalServer) -> None:
    inner_type, inner = encode_payload({"big": "x" * 300})
    ref = pb.BlobRef(ref="vf-blob-g1-abc", inner_payload_type=inner_type, size=len(inner))
    wire = _envelope(1, payload_type=BLOB_REF, payload=ref.SerializeToString())
    offline = _decode("-", stdin=wire)
    gone = _decode("-", "--redis", redis_server.url, stdin=wire)
    Redis.from_url(redis_server.url).set("vf-blob-g1-abc", inner)
    stored = _decode("-", "--redis", redis_server.url, stdin=wire)
    assert offline["payload"] == {"ref": "vf-blob-g1-abc", "size": len(inner), "type": inner_type}
    assert "not in the store" in str(gone["payload_store"])
    resolved = stored["payload"]
    assert isinstance(resolved, dict)
    assert resolved["resolved"] == {"big": "x" * 200 + "... (300 characters)"}


def test_an_unreachable_store_is_exit_3_with_its_url() -> None:
    ref = pb.BlobRef(ref="vf-blob-g1-abc", inner_payload_type="videoflow.v1.Value", size=3)
    wire = _envelope(1, payload_type=BLOB_REF, payload=ref.SerializeToString())
    url = f"redis://127.0.0.1:{free_port()}/0"
    done = vf("debug", "decode", "-", "--redis", url, stdin=wire)
    assert done.code == 3 and "error[VF_STORE_UNAVAILABLE]" in done.err and url in done.err
