"""``vf dlq`` on real servers, with dead letters a real flow produced: a BATCH flow whose
``scale`` node refuses item 3 (poison.py) and a REALTIME one whose consumer refuses an
item until its bug is fixed (fixable.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from nats.js import JetStreamContext
from redis import Redis

from tests.runtime.opshelp import Servers, fresh_servers, run_identity, vf, with_js
from tests.runtime.support import finish_flow, run_flow, start_flow, wait_until
from vf.commands.ops.dlq import DeadLetter
from vf.commands.ops.replay import Verdict, publish
from vf_runtime.broker.naming import RunNames
from vf_runtime.wire import BLOB_REF, DATA, Envelope, encode_envelope

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it


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
    # --nats names a server vf did not start for this run: the run says whose answered
    said = f"[vf] using the broker at {servers.nats.url}: server_name {servers.nats.server_name}"
    assert said in run.output, run.output[:2000]
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
    decoded = vf(
        "debug", "decode", "--dlq", "poison:1", "--format", "json", nats_url=servers.nats.url
    )
    assert decoded.code == 0 and decoded.json() == record["envelope"]
    missing = vf("dlq", "show", "poison:99", nats_url=servers.nats.url)
    assert missing.code == 2 and "error[VF_DLQ_NOT_FOUND]" in missing.err
    garbage = vf("dlq", "show", "poison", nats_url=servers.nats.url)
    assert garbage.code == 2 and "error[VF_DLQ_ID]" in garbage.err


FINISHED = "a finished generation does not run again"


def test_replay_needs_yes_and_refuses_a_finished_batch_generation_by_name(
    servers: Servers, poison: RunNames
) -> None:
    url = servers.nats.url
    before = _pending(url, poison)
    unconfirmed = vf("dlq", "replay", "--flow", "poison", nats_url=url)
    dry = vf("dlq", "replay", "--flow", "poison", "--dry-run", "--format", "json", nats_url=url)
    done = vf("dlq", "replay", "--flow", "poison", "--yes", "--format", "json", nats_url=url)
    after = _pending(url, poison)
    print(f"[dlq replay finished] pending on scale--from--numbers: {before} -> {after}")
    assert unconfirmed.code == 2 and "error[VF_CONFIRM]" in unconfirmed.err
    assert dry.code == 3 and FINISHED in dry.json()["records"][0]["reason"]
    assert done.code == 3 and done.json()["records"][0]["result"] == "refused"
    assert FINISHED in done.json()["records"][0]["reason"]
    assert after == before, "a refused replay published"


def test_a_fixed_item_is_replayed_into_a_running_batch_generation_once(
    servers: Servers, tmp_path: Path
) -> None:
    url, out, bug, log = (
        servers.nats.url,
        tmp_path / "sink.jsonl",
        tmp_path / "bug",
        tmp_path / "run.log",
    )
    bug.write_text("1")
    env = {"VF_TEST_OUT": str(out), "VF_TEST_BUG": str(bug), "VF_TEST_COUNT": "40"}
    process = start_flow("slowfix.py", nats_url=url, redis_url=servers.redis.url, env=env, log=log)
    wait_until(lambda: _letters(url, "slowfix") == 1, timeout=60, what="the dead letter")
    refused_item = int(Path(f"{bug}.item").read_text())
    bug.unlink()  # the fix
    replay = vf("dlq", "replay", "--flow", "slowfix", "--yes", "--format", "json", nats_url=url)
    run = finish_flow(process, log=log, timeout=90)
    applied = [json.loads(line)["i"] for line in out.read_text().splitlines() if line]
    print(
        f"[dlq replay running batch] replay exit {replay.code}; flow exit {run.code}; "
        f"applied {len(applied)} item(s), item {refused_item} {applied.count(refused_item)} time(s)"
    )
    assert replay.code == 0, replay.out + replay.err
    assert replay.json()["records"][0]["result"] == "replayed"
    assert sorted(applied) == list(range(1, 41)), "an item was lost or applied twice"
    assert run.code == 6, run.output[-3000:]  # the generation did dead-letter an item


def _letters(url: str, flow: str) -> int:
    listed = vf("dlq", "ls", "--flow", flow, "--format", "json", nats_url=url)
    return len(listed.json()["dead_letters"]) if listed.code == 0 else 0


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
    assert FINISHED in kept.json()["records"][0]["reason"], "the stored payload was not accepted"


def test_an_undecodable_dead_letter_is_shown_and_never_replayed(
    servers: Servers, poison: RunNames
) -> None:
    url = servers.nats.url
    headers = {
        "VF-Origin-Node": "scale",
        "VF-Run-Id": poison.run_id,
        "VF-Code": "VF_POISON_DECODE",
        "VF-Generation": poison.generation,
    }

    async def body(js: JetStreamContext) -> int:
        ack = await js.publish(poison.dlq_subject("scale"), b"\x00garbage", headers=headers)
        return int(ack.seq)

    seq = with_js(url, body)
    shown = vf("dlq", "show", f"poison:{seq}", "--format", "json", nats_url=url)
    replay = vf(
        "dlq",
        "replay",
        "--flow",
        "poison",
        "--code",
        "VF_POISON_DECODE",
        "--yes",
        "--format",
        "json",
        nats_url=url,
    )
    assert shown.code == 0 and shown.json()["envelope_error"].startswith("VF_WIRE_DECODE: ")
    assert replay.code == 3 and replay.json()["records"][0]["reason"].startswith("VF_WIRE_DECODE")


def test_export_writes_the_records_whole_for_a_repair_run(
    servers: Servers, poison: RunNames, tmp_path: Path
) -> None:
    """A finished generation's dead letters are not replayed into it (ADR 0162); they are
    exported, bytes and all, in the form vf debug decode --encoding json reads."""
    out = tmp_path / "letters.jsonl"
    done = vf(
        "dlq", "export", "--flow", "poison", "--node", "scale", "--code", "VF_NODE_VALUEERROR",
        "--out", str(out), nats_url=servers.nats.url,
    )  # fmt: skip
    assert done.code == 0, done.err
    lines = out.read_text().splitlines()
    record = json.loads(lines[0])
    print(f"[dlq export] {len(lines)} record(s); first {record['id']} of run {record['run']}")
    assert len(lines) == 1 and record["run"] == poison.run_id and record["node"] == "scale"
    decoded = vf("debug", "decode", "-", "--encoding", "json", "--format", "json",
                 stdin=lines[0].encode())  # fmt: skip
    assert decoded.code == 0, decoded.err
    assert decoded.json()["payload"] == {"i": 3}


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


def test_a_replay_carries_the_items_trace_context_on(servers: Servers) -> None:
    """A dead letter keeps its item's ``traceparent`` and ``tracestate`` (TRACE-1); the
    replayed message carries both, so the item's next delivery continues its trace."""
    context = {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "vendor=1",
    }

    def letter(headers: dict[str, str], seq: int) -> Verdict:
        record = DeadLetter(
            flow="traced", seq=seq, subject="", time=None, headers=headers, data=b"x"
        )
        return Verdict(letter=record, subject="traced.replayed")

    async def body(js: JetStreamContext) -> list[dict[str, str]]:
        await js.add_stream(name="traced-replayed", subjects=["traced.replayed"])
        first = await publish(js, letter({"VF-Run-Id": "r", **context}, 1), "a1")
        second = await publish(js, letter({"VF-Run-Id": "r"}, 2), "a2")
        found = [await js.get_msg("traced-replayed", seq=s) for s in (first, second)]
        return [{str(k): str(v) for k, v in (m.headers or {}).items()} for m in found]

    traced, plain = with_js(servers.nats.url, body)
    print(f"[replay headers] {traced}")
    assert context.items() <= traced.items()
    assert traced["VF-Replay-Of"] == "vf-traced-dlq:1"
    assert "traceparent" not in plain and "tracestate" not in plain
