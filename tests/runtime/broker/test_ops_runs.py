"""``vf runs`` and ``vf teardown`` on real servers: a finished run superseded by a graph
change, a live REALTIME run that must not be torn down, and the fix-and-replay story."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from nats.js import JetStreamContext

from tests.runtime.opshelp import (
    Servers,
    fresh_servers,
    run_identity,
    stream_names,
    vf,
    with_js,
)
from tests.runtime.support import finish_flow, run_flow, start_flow, wait_until
from vf.commands.ops import teardown
from vf.commands.ops.runs import flow_runs
from vf.commands.ops.select import Selector
from vf_runtime.broker.client import announce_stop
from vf_runtime.broker.naming import RunNames
from vf_runtime.broker.provision import RunTopology, provision
from vf_runtime.broker.topology import NodeTopology
from vf_runtime.local.infra import LocalServer, free_port
from vf_runtime.worker.slots import SlotLease

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

SRC = NodeTopology(
    name="src", parents=(), replicas=1, partitioned=False, has_children=True, max_deliver=1
)
MID = NodeTopology(
    name="mid", parents=("src",), replicas=1, partitioned=False, has_children=True, max_deliver=1
)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    yield from fresh_servers(tmp_path / "servers")


def _poison(servers: Servers, graph: str, out: Path) -> RunNames:
    run = run_flow(graph, nats=servers.nats, redis=servers.redis, env={"VF_TEST_OUT": str(out)})
    assert run.code == 6, run.output[-3000:]
    return RunNames("poison", *run_identity(run, "poison"))


def _tree(directory: Path, names: RunNames) -> Path:
    (directory / "plan").mkdir(parents=True)
    plan = {"flow_id": names.flow_id, "run_id": names.run_id, "generation": names.generation}
    (directory / "plan" / "local.json").write_text(json.dumps(plan), encoding="utf-8")
    return directory


def _lease_a_slot(url: str, names: RunNames) -> str:
    """What a Deployment pod of the run does as it starts (ENV-6): lease ordinal 0 of
    'scale'; it is killed before releasing it, so the bucket keeps the lease."""

    async def body(js: JetStreamContext) -> None:
        lease = SlotLease(js, names=names, node="scale", replicas=2)
        assert await lease.acquire(lambda: False) == 0

    with_js(url, body)
    return f"KV_{names.slot_bucket()}"


def _runs(url: str, flow: str) -> list[tuple[str, str]]:
    listed = vf("runs", "--flow", flow, "--format", "json", nats_url=url)
    assert listed.code == 0, listed.err
    return [(r["run"], r["generation"]) for r in listed.json()["runs"]]


def test_teardown_superseded_removes_the_run_a_graph_change_left_and_keeps_the_dlq(
    servers: Servers, tmp_path: Path
) -> None:
    url = servers.nats.url
    old = _poison(servers, "poison.py", tmp_path / "old.jsonl")
    new = _poison(servers, "poison_v2.py", tmp_path / "new.jsonl")
    assert old.run_id != new.run_id, "the graph change kept the run id"
    tree = _tree(tmp_path / "tree", new)
    old_slots, new_slots = _lease_a_slot(url, old), _lease_a_slot(url, new)
    before = _runs(url, "poison")
    refused = vf("teardown", "--flow", "poison", "--superseded", "--tree", str(tree), nats_url=url)
    unchanged = _runs(url, "poison")
    done = vf(
        "teardown",
        "--flow",
        "poison",
        "--superseded",
        "--tree",
        str(tree),
        "--yes",
        "--format",
        "json",
        nats_url=url,
    )
    after = _runs(url, "poison")
    print(f"[teardown --superseded] runs: {len(before)} -> {len(unchanged)} -> {len(after)}")
    assert refused.code == 2 and "error[VF_CONFIRM]" in refused.err
    assert before == unchanged == [(old.run_id, old.generation), (new.run_id, new.generation)]
    assert done.code == 0, done.err
    assert done.json()["removed"] == sorted([old_slots, old.stream("numbers"), old.stream("scale")])
    assert done.json()["remaining"] == []
    assert after == [(new.run_id, new.generation)]
    assert "vf-poison-dlq" in stream_names(url), "teardown removed the DLQ"
    assert old_slots not in stream_names(url) and new_slots in stream_names(url)
    letters = vf("dlq", "ls", "--flow", "poison", "--format", "json", nats_url=url).json()
    assert {r["run"] for r in letters["dead_letters"]} == {old.run_id, new.run_id}
    replay = vf("dlq", "replay", "--flow", "poison", "--run", old.run_id, "--yes", nats_url=url)
    assert replay.code == 3 and "no longer exists on this broker" in replay.out
    last = vf("teardown", "--flow", "poison", "--run", new.run_id, "--yes", nats_url=url)
    assert last.code == 0 and _runs(url, "poison") == []
    assert f"removed replica-slot bucket {new_slots}" in last.out
    assert new_slots not in stream_names(url), "the run's replica-slot bucket outlived it"


def test_teardown_refuses_a_live_run_and_a_fixed_item_is_replayed_into_it(
    servers: Servers, tmp_path: Path
) -> None:
    url, out, bug = servers.nats.url, tmp_path / "sink.jsonl", tmp_path / "bug"
    bug.write_text("1")
    env = {"VF_TEST_OUT": str(out), "VF_TEST_BUG": str(bug)}
    process = start_flow(
        "fixable.py", nats_url=url, redis_url=servers.redis.url, env=env, log=tmp_path / "run.log"
    )
    try:
        wait_until(
            lambda: Path(f"{bug}.item").exists() and out.exists(), timeout=60, what="a refusal"
        )
        refused_item = int(Path(f"{bug}.item").read_text())
        wait_until(lambda: _letters(url) == 1, timeout=30, what="the dead letter")
        [(run_id, generation)] = _runs(url, "fixable")
        live = vf("teardown", "--flow", "fixable", "--run", run_id, "--yes", nats_url=url)
        streams = stream_names(url)
        bug.unlink()  # the fix
        replay = vf("dlq", "replay", "--flow", "fixable", "--yes", nats_url=url)
        wait_until(lambda: refused_item in _applied(out), timeout=30, what="the replayed item")
    finally:
        for _ in range(3):
            announce_stop(url, RunNames("fixable", run_id, generation))
        run = finish_flow(process, log=tmp_path / "run.log", timeout=60)
    print(
        f"[teardown live] exit {live.code}; replayed item {refused_item} applied "
        f"{_applied(out).count(refused_item)} time(s)"
    )
    assert live.code == 3 and "error[VF_RUN_LIVE]" in live.err and "sink--from--camera" in live.err
    assert RunNames("fixable", run_id, generation).stream("camera") in streams
    assert replay.code == 0 and "replayed" in replay.out
    assert _applied(out).count(refused_item) == 1
    assert run.code in (0, 6), run.output[-3000:]
    _replays_are_never_deduplicated(url, RunNames("fixable", run_id, generation))
    done = vf("teardown", "--flow", "fixable", "--run", run_id, "--yes", "--force", nats_url=url)
    assert done.code == 0 and _runs(url, "fixable") == []


def _replays_are_never_deduplicated(url: str, names: RunNames) -> None:
    """Two replays of one record, into the stopped REALTIME run (queued for its next
    replicas): both stored, each under its own id and marked with the record it replays."""
    replays = [
        vf("dlq", "replay", "--flow", "fixable", "--yes", "--format", "json", nats_url=url).json()
        for _ in range(2)
    ]
    seqs = [r["records"][0]["stream_seq"] for r in replays]

    async def last(js: JetStreamContext) -> dict[str, str]:
        msg = await js.get_last_msg(names.stream("camera"), names.subject("camera"))
        return dict(msg.headers or {})

    headers = with_js(url, last)
    print(f"[replay twice] stream sequences {seqs}; last replay id {headers.get('VF-Replay-Id')}")
    assert seqs[1] > seqs[0], "the second replay was de-duplicated away"
    assert headers["VF-Replay-Of"] == "vf-fixable-dlq:1"
    assert headers["VF-Replay-Id"] == replays[1]["replay_id"] != replays[0]["replay_id"]


def _letters(url: str) -> int:
    listed = vf("dlq", "ls", "--flow", "fixable", "--format", "json", nats_url=url)
    return len(listed.json()["dead_letters"]) if listed.code == 0 else 0


def _applied(out: Path) -> list[int]:
    if not out.exists():
        return []
    return [json.loads(line)["i"] for line in out.read_text().splitlines() if line]


def test_teardown_reports_what_is_still_there_after_deleting(servers: Servers) -> None:
    """A stream of the run created after vf read the broker (a provision Job re-creating
    the run meanwhile) is not deleted and is named as remaining."""
    url = servers.nats.url
    names = RunNames("late", "r1", "g1")
    early = RunTopology(
        flow_id="late", run_id="r1", flow_type="batch", nodes=(SRC,), generation="g1"
    )
    later = RunTopology(
        flow_id="late", run_id="r1", flow_type="batch", nodes=(SRC, MID), generation="g1"
    )

    async def body(js: JetStreamContext) -> tuple[list[str], list[str]]:
        await provision(js, early)
        selection = teardown.select_run(
            await flow_runs(js, "late"), Selector(flow="late", run="r1")
        )
        await provision(js, later)  # re-created meanwhile, one stream more
        outcome = await teardown.remove(js, selection, "late")
        return outcome.removed, outcome.remaining

    removed, remaining = with_js(url, body)
    print(f"[teardown incomplete] removed {removed}, remaining {remaining}")
    assert removed == [names.stream("src")]
    assert remaining == [names.stream("mid")]


def test_teardown_without_runs_or_plans_is_a_named_error(servers: Servers, tmp_path: Path) -> None:
    url = servers.nats.url
    both = vf("teardown", "--flow", "f", "--run", "r", "--superseded", nats_url=url)
    empty = vf("teardown", "--flow", "f", "--superseded", "--tree", str(tmp_path), nats_url=url)
    stray = vf("teardown", "--flow", "f", "--superseded", "--generation", "g1", nats_url=url)
    nothing = vf("teardown", "--flow", "f", "--run", "r", nats_url=url)
    assert stray.code == 2 and "error[VF_TEARDOWN_ARGS]" in stray.err
    assert both.code == 2 and "error[VF_TEARDOWN_ARGS]" in both.err
    assert empty.code == 2 and "error[VF_TEARDOWN_TREE]" in empty.err
    assert nothing.code == 0 and "nothing to remove" in nothing.out


COMMANDS = (
    ("dlq", "ls", "--flow", "f"),
    ("dlq", "show", "f:1"),
    ("dlq", "replay", "--flow", "f", "--yes"),
    ("dlq", "purge", "--flow", "f", "--yes"),
    ("runs", "--flow", "f"),
    ("teardown", "--flow", "f", "--run", "r", "--yes"),
    ("debug", "decode", "--dlq", "f:1"),
)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_an_unreachable_broker_is_exit_3_with_the_url_quickly(
    command: tuple[str, ...], redis_server: LocalServer
) -> None:
    nobody = f"nats://127.0.0.1:{free_port()}"
    not_nats = redis_server.url.replace("redis://", "nats://").rsplit("/", 1)[0]
    for url in (nobody, not_nats):
        started = time.monotonic()
        done = subprocess.run(
            [str(Path(sys.executable).with_name("vf")), *command, "--nats", url, "--timeout", "2"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "VF_NATS_URL": ""},
        )
        took = time.monotonic() - started
        print(f"[unreachable {url}] {' '.join(command[:2])}: exit {done.returncode} in {took:.1f}s")
        assert done.returncode == 3, done.stderr
        assert url in done.stderr and "nats-server -js" in done.stderr
        assert "Traceback" not in done.stderr
        assert took < 15
