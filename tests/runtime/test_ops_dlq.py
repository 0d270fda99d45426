"""``vf dlq`` on real servers, with dead letters a real flow produced: a BATCH flow whose
``scale`` node refuses item 3 (poison.py) and a REALTIME one whose consumer refuses an
item until its bug is fixed (fixable.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from nats.js import JetStreamContext
from redis import Redis

from tests.runtime.conftest import run_flow
from tests.runtime.opshelp import Servers, fresh_servers, run_identity, vf, with_js
from vf_runtime.naming import RunNames
from vf_runtime.wire import BLOB_REF, DATA, Envelope, encode_envelope


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    yield from fresh_servers(tmp_path_factory.mktemp("ops-dlq"))


@pytest.fixture(scope="module")
def poison(servers: Servers, tmp_path_factory: pytest.TempPathFactory) -> RunNames:
    """One finished run of the poison flow: item 3 dead-lettered by ``scale``."""
    out = tmp_path_factory.mktemp("poison") / "sink.jsonl"
    run = run_flow(
        "poison.py", nats=servers.nats, redis=servers.redis, env={"VF_TEST_OUT": str(out)}
    )
    assert run.code == 6, run.output[-3000:]
    run_id, generation = run_identity(run, "poison")
    return RunNames("poison", run_id, generation)


def _pending(url: str, names: RunNames) -> int:
    async def body(js: JetStreamContext) -> int:
        info = await js.consumer_info(names.stream("numbers"), "scale--from--numbers")
        return int(info.num_pending or 0)

    return with_js(url, body)


def test_ls_lists_the_dead_letter_with_origin_code_and_reason(
    servers: Servers, poison: RunNames
) -> None:
    listed = vf("dlq", "ls", "--flow", "poison", "--format", "json", nats_url=servers.nats.url)
    assert listed.code == 0, listed.err
    rows = listed.json()["dead_letters"]
    print(f"[dlq ls] {len(rows)} record(s): {rows}")
    assert [(r["id"], r["node"], r["code"]) for r in rows] == [
        ("poison:1", "scale", "VF_NODE_VALUEERROR")
    ]
    assert rows[0]["run"] == poison.run_id and rows[0]["generation"] == poison.generation
    assert rows[0]["delivered"] == 2 and rows[0]["reason"] == "ValueError: refusing item 3"
    table = vf("dlq", "ls", "--flow", "poison", nats_url=servers.nats.url)
    assert "poison:1" in table.out and "DISPOSITION" in table.out
    for option, value in (("--node", "sink"), ("--code", "VF_OTHER"), ("--run", "elsewhere")):
        other = vf(
            "dlq",
            "ls",
            "--flow",
            "poison",
            option,
            value,
            "--format",
            "json",
            nats_url=servers.nats.url,
        )
        assert other.json()["dead_letters"] == [], option


def test_show_decodes_the_envelope_and_keeps_every_header(
    servers: Servers, poison: RunNames
) -> None:
    shown = vf("dlq", "show", "poison:1", "--format", "json", nats_url=servers.nats.url)
    assert shown.code == 0, shown.err
    record = shown.json()
    assert record["headers"]["VF-Origin-Stream"] == poison.stream("numbers")
    assert record["headers"]["VF-Disposition"] == "transient"
    assert record["envelope"]["producer"] == "numbers"
    assert record["envelope"]["payload"] == {"i": 3}
    missing = vf("dlq", "show", "poison:99", nats_url=servers.nats.url)
    assert missing.code == 2 and "error[VF_DLQ_NOT_FOUND]" in missing.err
    garbage = vf("dlq", "show", "poison", nats_url=servers.nats.url)
    assert garbage.code == 2 and "error[VF_DLQ_ID]" in garbage.err


def test_replay_needs_yes_then_republishes_traceably_and_never_deduplicated(
    servers: Servers, poison: RunNames
) -> None:
    url = servers.nats.url
    before = _pending(url, poison)
    refused = vf("dlq", "replay", "--flow", "poison", nats_url=url)
    dry = vf("dlq", "replay", "--flow", "poison", "--dry-run", nats_url=url)
    unchanged = _pending(url, poison)
    assert refused.code == 2 and "error[VF_CONFIRM]" in refused.err
    assert dry.code == 0 and "would replay" in dry.out
    assert unchanged == before, "a replay without --yes published"
    first = vf("dlq", "replay", "--flow", "poison", "--yes", "--format", "json", nats_url=url)
    second = vf("dlq", "replay", "--flow", "poison", "--yes", "--format", "json", nats_url=url)
    after = _pending(url, poison)
    print(f"[dlq replay] pending on scale--from--numbers: {before} -> {unchanged} -> {after}")
    assert first.code == 0 and second.code == 0, first.err + second.err
    assert after == before + 2, "the second replay was de-duplicated away"

    async def replayed(js: JetStreamContext) -> list[dict[str, str]]:
        found = []
        for seq in (
            first.json()["records"][0]["stream_seq"],
            second.json()["records"][0]["stream_seq"],
        ):
            msg = await js.get_msg(poison.stream("numbers"), seq=seq)
            found.append(dict(msg.headers or {}))
        return found

    headers = with_js(url, replayed)
    assert [h["VF-Replay-Of"] for h in headers] == ["vf-poison-dlq:1"] * 2
    assert headers[0]["VF-Replay-Id"] != headers[1]["VF-Replay-Id"]
    assert headers[0]["VF-Generation"] == poison.generation


def _blob_letter(url: str, names: RunNames, ref: str) -> None:
    """A dead letter as a worker writes it for an item whose payload was offloaded."""
    envelope = Envelope(
        type=DATA,
        producer="numbers",
        flow_id=names.flow_id,
        run_id=names.run_id,
        trace_id="numbers:blob:1",
        seq=1,
        payload_type=BLOB_REF,
        payload=_blob_ref_bytes(ref),
    )
    headers = {
        "VF-Origin-Node": "scale",
        "VF-Origin-Stream": names.stream("numbers"),
        "VF-Run-Id": names.run_id,
        "VF-Generation": names.generation,
        "VF-Code": "VF_BLOB_MISSING",
        "VF-Error": f"payload {ref} is not in the store",
        "VF-Disposition": "poison",
        "VF-Num-Delivered": "1",
    }

    async def body(js: JetStreamContext) -> None:
        await js.publish(names.dlq_subject("scale"), encode_envelope(envelope), headers=headers)

    with_js(url, body)


def _blob_ref_bytes(ref: str) -> bytes:
    from vf_runtime.wire import envelope_pb2 as pb

    return pb.BlobRef(ref=ref, inner_payload_type="videoflow.v1.Value", size=10).SerializeToString()


def test_replay_refuses_by_name_a_payload_that_left_the_store(
    servers: Servers, poison: RunNames
) -> None:
    url, ref = servers.nats.url, f"vf-blob-{poison.generation}-gone"
    _blob_letter(url, poison, ref)
    only = ("--code", "VF_BLOB_MISSING", "--format", "json")
    blind = vf("dlq", "replay", "--flow", "poison", *only, "--yes", nats_url=url)
    gone = vf(
        "dlq",
        "replay",
        "--flow",
        "poison",
        *only,
        "--yes",
        "--redis",
        servers.redis.url,
        nats_url=url,
    )
    assert blind.code == 3 and "pass --redis" in blind.json()["records"][0]["reason"]
    assert gone.code == 3 and "has expired from the store" in gone.json()["records"][0]["reason"]
    Redis.from_url(servers.redis.url).set(ref, b"x")
    kept = vf(
        "dlq",
        "replay",
        "--flow",
        "poison",
        *only,
        "--dry-run",
        "--redis",
        servers.redis.url,
        nats_url=url,
    )
    assert kept.code == 0 and kept.json()["records"][0]["result"] == "would replay"


def test_purge_needs_yes_and_empties_only_what_it_names(servers: Servers, poison: RunNames) -> None:
    url = servers.nats.url

    def count() -> int:
        listed = vf("dlq", "ls", "--flow", "poison", "--format", "json", nats_url=url)
        return len(listed.json()["dead_letters"])

    before = count()
    refused = vf("dlq", "purge", "--flow", "poison", nats_url=url)
    other = vf("dlq", "purge", "--flow", "poison", "--run", "another", "--yes", nats_url=url)
    kept = count()
    done = vf(
        "dlq",
        "purge",
        "--flow",
        "poison",
        "--run",
        poison.run_id,
        "--yes",
        "--format",
        "json",
        nats_url=url,
    )
    print(f"[dlq purge] records: {before} -> {kept} -> {count()}")
    assert refused.code == 2 and "error[VF_CONFIRM]" in refused.err
    assert other.code == 0 and kept == before >= 1
    assert done.code == 0 and done.json()["purged"] == before and count() == 0
