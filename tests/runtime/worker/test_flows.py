"""Whole flows on real nats-server and redis-server: delivery, crashes, joins, overload, blobs."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import inspect
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest
import redis

from tests.runtime.support import FLOWS, FlowRun, run_flow
from vf.pipeline import CompileRequest, compile_project
from vf_runtime.broker.client import announce_stop
from vf_runtime.broker.naming import RunNames
from vf_runtime.local.infra import LocalServer
from vf_runtime.wire import decode_envelope, decode_payload

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _ok(run: FlowRun) -> None:
    assert run.code == 0, run.output[-4000:]
    assert "flow finished" in run.output


def test_batch_flow_delivers_every_item_exactly_once(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    out = tmp_path / "sink.jsonl"
    env = {"VF_TEST_OUT": str(out), "VF_TEST_FLOW": "exactly-once", "VF_TEST_COUNT": "40"}
    run = run_flow("linear.py", nats=nats_server, redis=redis_server, env=env)
    _ok(run)
    items = sorted(line["i"] for line in _lines(out))
    assert items == list(range(1, 41))
    assert all(line["v"] == 2 * line["i"] for line in _lines(out))


def test_sigkilled_worker_is_restarted_and_nothing_is_lost(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    out, marker = tmp_path / "sink.jsonl", tmp_path / "crashed"
    env = {
        "VF_TEST_OUT": str(out),
        "VF_TEST_FLOW": "crash",
        "VF_TEST_COUNT": "40",
        "VF_TEST_CRASH_AT": "7",
        "VF_TEST_MARKER": str(marker),
        "VF_ACK_WAIT_SECONDS": "2",
        # the restarted scale replica may have nothing left to publish: the sink then takes
        # its marker after the quiet wait (EOS-6), which must end before the 30 s stall limit
        "VF_EOS_WAIT_SECONDS": "5",
    }
    run = run_flow("linear.py", nats=nats_server, redis=redis_server, env=env)
    _ok(run)
    assert marker.exists(), "the scale replica never reached the item that kills it"
    assert "exited with -9; restart 1" in run.output
    items = sorted(line["i"] for line in _lines(out))
    assert items == list(range(1, 41)), "lost or duplicated items after the SIGKILL"


def test_join_completes_under_partitioned_replicas(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    out = tmp_path / "sink.jsonl"
    run = run_flow("join.py", nats=nats_server, redis=redis_server, env={"VF_TEST_OUT": str(out)})
    _ok(run)
    lines = _lines(out)
    assert sorted(line["i"] for line in lines) == list(range(1, 31))
    assert all(line["sum"] == 5 * line["i"] for line in lines)
    assert "[pair/r0]" in run.output and "[pair/r1]" in run.output


def test_realtime_keeps_the_freshest_items_and_never_loses_eos(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    out = tmp_path / "sink.jsonl"
    run = run_flow(
        "realtime.py", nats=nats_server, redis=redis_server, env={"VF_TEST_OUT": str(out)}
    )
    _ok(run)  # ending at all proves every end-of-stream marker arrived
    items = [line["i"] for line in _lines(out)]
    assert 60 in items, "the freshest item was evicted"
    assert len(items) < 45, f"an overloaded REALTIME stage should skip stale items: {len(items)}"
    assert items == sorted(items)


def _command_calls(client: redis.Redis, command: str) -> int:
    stats = client.info("commandstats")
    entry = stats.get(f"cmdstat_{command}", {})
    return int(entry.get("calls", 0)) if isinstance(entry, dict) else 0


def test_a_4_mib_payload_goes_through_redis_and_is_released(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    sets_before = _command_calls(client, "set")
    out = tmp_path / "sink.jsonl"
    run = run_flow("blob.py", nats=nats_server, redis=redis_server, env={"VF_TEST_OUT": str(out)})
    _ok(run)
    lines = _lines(out)
    assert [line["i"] for line in lines] == [1, 2, 3]
    assert all(line["blob"] == 4 * 1024 * 1024 and line["blob_ok"] for line in lines)
    assert _command_calls(client, "set") - sets_before >= 3, "payloads did not go to Redis"
    assert list(client.scan_iter("vf:*:blob*")) == [], "blobs were not released after the ack"


def test_frames_arrive_whole_as_arrays_through_the_payload_store(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    """Encoded from the array's memory, decoded by slicing: every byte of every frame."""
    spec = importlib.util.spec_from_file_location("framenodes", FLOWS / "framenodes.py")
    assert spec is not None and spec.loader is not None
    nodes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nodes)
    client = redis.Redis.from_url(redis_server.url)
    out = tmp_path / "sink.jsonl"
    run = run_flow("frames.py", nats=nats_server, redis=redis_server, env={"VF_TEST_OUT": str(out)})
    _ok(run)
    expected = [hashlib.sha256((255 - nodes.frame(i)).tobytes()).hexdigest() for i in (1, 2, 3)]
    lines = _lines(out)
    assert [line["sha256"] for line in lines] == expected
    assert all(line["array"] and line["shape"] == [1080, 1920, 3] for line in lines)
    assert {line["dtype"] for line in lines} == {"uint8"}
    assert list(client.scan_iter("vf:*:blob*")) == [], "blobs were not released after the ack"


async def _dead_letter(url: str, flow: str) -> tuple[dict[str, str], bytes]:
    client = await nats.connect(url)
    try:
        js = client.jetstream()
        message = await js.get_last_msg(f"vf-{flow}-dlq", f"vf.{flow}._dlq.>")
        return dict(message.headers or {}), message.data or b""
    finally:
        await client.close()


def test_a_poison_message_ends_in_the_dlq_with_its_reason(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    out = tmp_path / "sink.jsonl"
    env = {"VF_TEST_OUT": str(out), "VF_RETRY_DELAY_CAP_SECONDS": "0.5"}
    run = run_flow("poison.py", nats=nats_server, redis=redis_server, env=env)
    assert run.code == 6, run.output[-4000:]  # finished, but an item was set aside
    ended = r"flow finished with 1 item\(s\) dead-lettered \(restarts: (\d+), exit 6\)"
    finished = re.search(ended, run.output)
    assert finished is not None, run.output[-6000:]
    assert "[vf] scale: 1 item(s) dead-lettered; first reasons:" in run.output
    assert "VF_NODE_VALUEERROR: ValueError: refusing item 3" in run.output
    copy = re.search(r"a copy is kept in (\S+)", run.output)
    assert copy is not None and "refusing item 3" in Path(copy.group(1)).read_text()
    received = sorted(line["i"] for line in _lines(out))
    # A worker that exits and is restarted (seen once in CI) has its unacked items
    # delivered again: at least once and never lost; exactly once otherwise.
    assert sorted(set(received)) == [1, 2, 4, 5, 6], run.output[-6000:]
    assert finished.group(1) != "0" or len(received) == 5, received
    headers, data = asyncio.run(_dead_letter(nats_server.url, "poison"))
    assert headers["VF-Code"] == "VF_NODE_VALUEERROR"
    assert "refusing item 3" in headers["VF-Error"]
    assert headers["VF-Num-Delivered"] == "2"  # one retry, then the dead letter
    envelope = decode_envelope(data)
    assert decode_payload(envelope.payload_type, envelope.payload) == {"i": 3}


@pytest.mark.parametrize("threshold", [3, 0])
def test_the_breaker_stops_a_replica_that_fails_every_item_instead_of_shredding_the_stream(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer, threshold: int
) -> None:
    """Every call fails. With the breaker at 3 the replica stops after 3 failures in a row
    and hands the item back, each of its lives; most items stay in the stream for a fixed
    rollout and the node is reported lost. With the breaker off every item is retried
    and dead-lettered."""
    out = tmp_path / "sink.jsonl"
    env = {
        "VF_TEST_OUT": str(out),
        "VF_RETRY_DELAY_CAP_SECONDS": "0.2",
        "VF_BREAKER_THRESHOLD": str(threshold),
    }
    run = run_flow("broken.py", nats=nats_server, redis=redis_server, env=env)
    letters = re.search(r"\[vf\] scale: (\d+) item\(s\) dead-lettered", run.output)
    dead = int(letters.group(1)) if letters else 0
    print(f"[breaker {threshold}] exit {run.code}, dead-lettered {dead} of 12")
    assert _lines(out) == []
    if threshold:
        assert run.code == 4, run.output[-4000:]
        opened = r"error\[VF_BREAKER_OPEN\] 'scale' replica 0: \d+ calls in a row failed"
        assert len(re.findall(opened, run.output)) == 4  # each of its 4 lives stopped itself
        # A life settles at most threshold - 1 failed calls (the next opens the breaker and
        # hands its item back), and the first life's are first deliveries, retried rather
        # than dead-lettered: at most 2 dead letters in each of the 3 later lives.
        assert dead <= (threshold - 1) * 3, run.output[-4000:]
    else:
        assert run.code == 6, run.output[-4000:]
        assert "VF_BREAKER_OPEN" not in run.output and dead == 12


def test_a_new_run_dir_is_made_and_keeps_the_copy_of_the_dead_letters(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    """``--run-dir`` naming a folder that does not exist yet, in a flow with no claim
    mounts: vf makes it (with its parents) and keeps the dead letters' copy there."""
    kept = tmp_path / "runs" / "first"
    env = {"VF_TEST_OUT": str(tmp_path / "sink.jsonl"), "VF_RETRY_DELAY_CAP_SECONDS": "0.2"}
    run = run_flow(
        "poison.py", nats=nats_server, redis=redis_server, env=env, args=("--run-dir", str(kept))
    )
    assert run.code == 6, run.output[-4000:]
    copies = list(kept.glob("vf-dead-letters-poison-*.jsonl"))
    assert len(copies) == 1 and "refusing item 3" in copies[0].read_text(), run.output[-4000:]
    assert f"a copy is kept in {copies[0]}" in run.output


def test_a_node_that_cannot_be_called_with_its_inputs_is_poison_not_retried(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    """A join's ``process`` whose signature vf cannot read fails on the call itself: every
    group (both of its inputs) is dead-lettered at its first delivery as VF_NODE_SIGNATURE,
    not retried."""
    with pytest.raises(ValueError):  # the premise, on this Python: no signature to read
        inspect.signature(dict)
    out = tmp_path / "sink.jsonl"
    env = {"VF_TEST_OUT": str(out), "VF_RETRY_DELAY_CAP_SECONDS": "0.2"}
    run = run_flow("uncallable.py", nats=nats_server, redis=redis_server, env=env)
    assert run.code == 6, run.output[-4000:]
    assert "[vf] pick: 12 item(s) dead-lettered" in run.output  # 6 groups of 2 inputs
    assert "VF_NODE_SIGNATURE: SignatureMismatch: the node cannot be called" in run.output
    headers, _ = asyncio.run(_dead_letter(nats_server.url, "uncallable"))
    assert (headers["VF-Code"], headers["VF-Disposition"]) == ("VF_NODE_SIGNATURE", "poison")
    assert headers["VF-Num-Delivered"] == "1"
    assert _lines(out) == []


def test_nodes_that_declare_ctx_get_the_run_and_route_by_their_partition_key(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    """``process(item, ctx)`` and ``process(item, *, context)`` get the runtime context;
    ``ctx.set_partition_key`` routes each output to the partitioned replica owning it."""
    out = tmp_path / "sink.jsonl"
    run = run_flow("routed.py", nats=nats_server, redis=redis_server, env={"VF_TEST_OUT": str(out)})
    assert run.code == 0, run.output[-4000:]
    lines = _lines(out)
    assert sorted(line["i"] for line in lines) == list(range(1, 21))
    assert {tuple(line["by"]) for line in lines} == {("routed", "parity", 0)}
    parities = {r: {line["i"] % 2 for line in lines if line["replica"] == r} for r in (0, 1)}
    assert sorted(map(sorted, parities.values())) == [[0], [1]], parities


def test_stop_ends_a_running_realtime_flow(
    tmp_path: Path,
    nats_server: LocalServer,
    redis_server: LocalServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "sink.jsonl"
    monkeypatch.setenv("VF_TEST_OUT", str(out))
    graph = str(FLOWS / "live.py")
    plan = compile_project(CompileRequest(graph=graph)).plans[0]
    script = (
        "import sys\nfrom vf.commands.run_local.command import RunLocalRequest, run_local\n"
        f"sys.exit(run_local(RunLocalRequest(graph={graph!r}, nats_url={nats_server.url!r}, "
        f"redis_url={redis_server.url!r}, stall_seconds=30, generation='t1')))\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 30
        while len(_lines(out)) < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_lines(out)) >= 5, "the live flow never delivered anything"
        announce_stop(nats_server.url, RunNames(plan.flow_id, plan.run_id, "t1"))
        output, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, output[-3000:]
    assert "stop received" in output
    names = RunNames(plan.flow_id, plan.run_id, "t1")
    # What the stopped sink held it handed back (DELIV-10); what the camera sent after the
    # sink had gone the broker keeps for the next reader. Either way a new reader takes it
    # at once, and nothing stays leased until the 60 s ack wait runs out.
    asyncio.run(_take_at_once(nats_server.url, names, child="sink", parent="camera"))
    leased = asyncio.run(_ack_pending(nats_server.url, names, child="sink", parent="camera"))
    assert leased == 0, f"{leased} message(s) stay leased to a stopped reader until ack wait"


async def _take_at_once(url: str, names: RunNames, *, child: str, parent: str) -> None:
    """Let a new reader of ``child``'s durable take and ack what it gets within 5 s."""
    client = await nats.connect(url)
    try:
        sub = await client.jetstream().pull_subscribe_bind(
            names.durable(child, parent=parent), stream=names.stream(parent)
        )
        with contextlib.suppress(TimeoutError, nats.errors.TimeoutError):
            while True:
                for msg in await sub.fetch(batch=100, timeout=5.0):
                    await msg.ack()
    finally:
        await client.close()


async def _ack_pending(url: str, names: RunNames, *, child: str, parent: str) -> int:
    """Messages the broker still counts as delivered to ``child`` and not settled."""
    client = await nats.connect(url)
    try:
        info = await client.jetstream().consumer_info(
            names.stream(parent), names.durable(child, parent=parent)
        )
        return int(info.num_ack_pending)
    finally:
        await client.close()


def test_ctrl_c_stops_a_run_with_its_own_servers_and_exits_130(tmp_path: Path) -> None:
    out = tmp_path / "sink.jsonl"
    command = [str(Path(sys.executable).with_name("vf")), "run-local", str(FLOWS / "live.py")]
    process = subprocess.Popen(
        command,
        env={**os.environ, "VF_TEST_OUT": str(out)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while len(_lines(out)) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_lines(out)) >= 3, "the live flow never delivered anything"
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, output[-3000:]
    assert "started nats-server" in output
    # the environment has no payload store, so neither does the local run (as in a cluster)
    assert "started redis-server" not in output and "started valkey-server" not in output
    assert "interrupted; workers stopped" in output
