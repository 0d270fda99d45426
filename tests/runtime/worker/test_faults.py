"""Faults injected into running flows on real servers: killed workers, a restarted broker,
an unavailable payload store and a full stream. Nothing may be lost, applied twice,
or given a poison verdict; each test prints the counts it saw.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js import JetStreamContext

from tests.runtime.support import FLOWS, FlowRun, finish_flow, start_flow, wait_until
from vf.commands.run_local.command import provision_topology
from vf.pipeline import CompileRequest, compile_project
from vf_runtime.broker.naming import RunNames
from vf_runtime.broker.provision import provision
from vf_runtime.constants import BATCH_MAX_MSGS
from vf_runtime.local.infra import LocalServer, free_port, start_nats, start_redis
from vf_runtime.worker.replica import run_worker

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

SUMMARY = re.compile(r"\[(\w+/r\d+)\] .*summary: (.*)$", re.MULTILINE)


def _applied(path: Path) -> Counter[int]:
    """How many times the sink applied each item (one line per application)."""
    if not path.exists():
        return Counter()
    return Counter(json.loads(line)["i"] for line in path.read_text().splitlines() if line)


def _lines(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def _progress(directory: Path) -> int:
    """Items the scale replicas reported having processed (see testnodes.Scale)."""
    return sum(int(f.read_text() or 0) for f in directory.glob("scale-*"))


def _summaries(output: str) -> dict[str, dict[str, float]]:
    """Every worker's last summary line, by ``node/rN`` (a restarted replica: its last life)."""
    found: dict[str, dict[str, float]] = {}
    for label, fields in SUMMARY.findall(output):
        found[label] = {k: float(v) for k, v in (f.split("=") for f in fields.split())}
    return found


def _total(summaries: dict[str, dict[str, float]], field: str) -> int:
    return int(sum(counts.get(field, 0) for counts in summaries.values()))


def _restarts(run: FlowRun) -> int:
    match = re.search(r"\(restarts: (\d+), exit", run.output)
    return int(match.group(1)) if match else -1


def _report(name: str, counts: dict[str, Any]) -> str:
    line = f"{name}: " + ", ".join(f"{k}={v}" for k, v in counts.items())
    print(line)
    return line


def _check_exactly_once(applied: Counter[int], *, count: int, report: str) -> None:
    lost = sorted(set(range(1, count + 1)) - set(applied))
    twice = sorted(i for i, n in applied.items() if n > 1)
    assert not lost, f"{len(lost)} item(s) lost, first {lost[:10]}; {report}"
    assert not twice, f"{len(twice)} item(s) applied twice, first {twice[:10]}; {report}"
    assert sorted(applied) == list(range(1, count + 1)), report


def _env(tmp_path: Path, flow: str, count: int, **extra: str) -> dict[str, str]:
    return {
        "VF_TEST_OUT": str(tmp_path / "sink.jsonl"),
        "VF_TEST_FLOW": flow,
        "VF_TEST_COUNT": str(count),
        "VF_ACK_WAIT_SECONDS": "2",
        **extra,
    }


def test_workers_sigkilled_mid_batch_of_10000_lose_nothing_and_apply_each_once(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    """One scale replica is SIGKILLed from outside, the sink kills itself mid-item."""
    count, pids, marker = 10_000, tmp_path / "pids", tmp_path / "sink-killed"
    pids.mkdir()
    env = _env(
        tmp_path,
        "kill10k",
        count,
        VF_TEST_PIDS=str(pids),
        VF_TEST_SINK_CRASH_AT="6000",
        VF_TEST_MARKER=str(marker),
    )
    out, log = tmp_path / "sink.jsonl", tmp_path / "run.log"
    process = start_flow(
        "bulk.py", nats_url=nats_server.url, redis_url=redis_server.url, env=env, log=log
    )
    try:
        wait_until(lambda: _progress(pids) >= 3000, timeout=90, what="3,000 items through scale")
        victim = max(pids.glob("scale-*"), key=lambda f: int(f.read_text() or 0))
        pid, killed_after = int(victim.name.rsplit("-", 1)[1]), victim.read_text()
        os.kill(pid, signal.SIGKILL)
        run = finish_flow(process, log=log, timeout=150)
    finally:
        if process.poll() is None:
            process.kill()
    applied = _applied(out)
    summaries = _summaries(run.output)
    report = _report(
        "sigkill",
        {
            "items": count,
            "applied": sum(applied.values()),
            "distinct": len(applied),
            "killed": f"scale pid {pid} after {killed_after} items, sink at item 6000",
            "restarts": _restarts(run),
            "redelivered": _total(summaries, "redelivered"),
            "republished_and_deduplicated": _total(summaries, "deduplicated"),
            "received_again_not_reapplied": int(summaries.get("sink/r0", {}).get("skipped", 0)),
            "dead_lettered": _total(summaries, "dead_lettered"),
        },
    )
    assert run.code == 0, run.output[-4000:]
    assert marker.exists(), "the sink never reached the item that kills it"
    assert _restarts(run) == 2, report
    _check_exactly_once(applied, count=count, report=report)
    assert _total(summaries, "dead_lettered") == 0, report


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_nats_restarted_mid_run_loses_nothing(
    tmp_path: Path, redis_server: LocalServer, how: str
) -> None:
    """The broker goes down (shut down, or killed) and comes back on its file store."""
    count, port, store = 5000, free_port(), tmp_path / "nats"
    server = start_nats(store, port=port)
    out, log = tmp_path / "sink.jsonl", tmp_path / "run.log"
    env = _env(tmp_path, f"natsrestart-{how}", count)
    urls = {"nats_url": server.url, "redis_url": redis_server.url}
    process = start_flow("bulk.py", **urls, env=env, log=log)
    try:
        wait_until(lambda: _lines(out) >= 500, timeout=60, what="500 items at the sink")
        before = _lines(out)
        if how == "sigkill":  # a crash: no shutdown, whatever was acknowledged must be there
            server.process.kill()
            server.process.wait()
        else:
            server.stop()  # SIGTERM: the broker shuts down as in a rolling restart
        time.sleep(1.0)
        server = start_nats(store, port=port)
        run = finish_flow(process, log=log, timeout=150)
    finally:
        if process.poll() is None:
            process.kill()
        server.stop()
    applied = _applied(out)
    summaries = _summaries(run.output)
    report = _report(
        f"nats-restart ({how})",
        {
            "items": count,
            "applied_before_restart": before,
            "applied": sum(applied.values()),
            "distinct": len(applied),
            "publish_retries": _total(summaries, "publish_retries"),
            "redelivered": _total(summaries, "redelivered"),
            "received_again_not_reapplied": int(summaries.get("sink/r0", {}).get("skipped", 0)),
            "restarts": _restarts(run),
        },
    )
    assert run.code == 0, run.output[-4000:]
    assert "reconnected to the broker" in run.output, report
    _check_exactly_once(applied, count=count, report=report)


async def _dead_letters(url: str, flow: str) -> int:
    client = await nats.connect(url)
    try:
        info = await client.jetstream().stream_info(f"vf-{flow}-dlq")
        return int(info.state.messages)
    finally:
        await client.close()


def test_redis_unavailable_mid_run_retries_and_recovers(
    tmp_path: Path, nats_server: LocalServer
) -> None:
    """Every payload is offloaded; the store goes away for 3 s in the middle of the run."""
    count, port, store = 400, free_port(), tmp_path / "redis"
    redis = start_redis(store, port=port)
    out, log = tmp_path / "sink.jsonl", tmp_path / "run.log"
    env = _env(tmp_path, "redisdown", count, VF_TEST_SIZE="256")
    env["VF_MAX_INLINE_PAYLOAD_BYTES"] = "64"
    process = start_flow("bulk.py", nats_url=nats_server.url, redis_url=redis.url, env=env, log=log)
    try:
        wait_until(lambda: _lines(out) >= 100, timeout=60, what="100 items at the sink")
        before = _lines(out)
        redis.stop()  # SIGTERM: the append-only file is flushed, nothing stored is lost
        stopped = _lines(out)
        time.sleep(3.0)
        during = _lines(out)
        redis = start_redis(store, port=port)
        run = finish_flow(process, log=log, timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
        redis.stop()
    applied = _applied(out)
    summaries = _summaries(run.output)
    dead = asyncio.run(_dead_letters(nats_server.url, "redisdown"))
    report = _report(
        "redis-down",
        {
            "items": count,
            "applied_before_outage": before,
            "applied_while_redis_shut_down": stopped - before,
            "applied_while_redis_was_down": during - stopped,
            "applied": sum(applied.values()),
            "distinct": len(applied),
            "store_retries": _total(summaries, "store_retries"),
            "typed_failures_logged": run.output.count("VF_STORE_UNAVAILABLE during"),
            "failed": _total(summaries, "failed"),
            "dead_letters": dead,
        },
    )
    assert run.code == 0, run.output[-4000:]
    assert _total(summaries, "store_retries") > 0, report
    assert "VF_STORE_UNAVAILABLE during" in run.output, report
    assert _total(summaries, "failed") == 0 and dead == 0, report  # no node failure, no poison
    # an idempotent sink records each item before it takes the next: one may be in flight
    assert during - stopped <= 1, report
    assert all(line.get("blob") == 256 for line in _records(out)), report
    _check_exactly_once(applied, count=count, report=report)


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def test_a_full_batch_stream_backpressures_the_producer(
    tmp_path: Path,
    nats_server: LocalServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With no reader running, the producer fills its stream to the limit and waits."""
    count = BATCH_MAX_MSGS + 500
    out = tmp_path / "sink.jsonl"
    for key, value in _env(tmp_path, "flood", count).items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(FLOWS))
    caplog.set_level(logging.INFO, logger="vf")
    plan = compile_project(CompileRequest(graph=str(FLOWS / "flood.py"))).plans[0]
    stream = RunNames(plan.flow_id, plan.run_id).stream("numbers")

    def env(node: str) -> dict[str, str]:
        values = dict(next(w for w in plan.workloads if w.node == node).env)
        values.update(VF_NATS_URL=nats_server.url, VF_REPLICA_ID="0", VF_HEALTH_PORT="0")
        return values

    async def stored(js: JetStreamContext) -> int:
        return int((await js.stream_info(stream)).state.messages)

    async def body() -> dict[str, int]:
        client = await nats.connect(nats_server.url)
        js = client.jetstream()
        try:
            await provision(js, provision_topology(plan))
            producer = asyncio.create_task(run_worker(env("numbers")))
            deadline = time.monotonic() + 60
            while await stored(js) < BATCH_MAX_MSGS and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)  # the producer keeps trying; the stream stays at its limit
            held = {"stored_while_full": await stored(js), "producer_done": producer.done()}
            sink = asyncio.create_task(run_worker(env("sink")))
            codes = await asyncio.wait_for(asyncio.gather(producer, sink), timeout=120)
            return {**held, "producer_exit": codes[0], "sink_exit": codes[1]}
        finally:
            await client.close()

    seen = asyncio.run(body())
    applied = _applied(out)
    retries = sum(int(m) for m in re.findall(r"summary: .*publish_retries=(\d+)", caplog.text) if m)
    report = _report(
        "backpressure",
        {
            "items": count,
            "stream_limit": BATCH_MAX_MSGS,
            **seen,
            "publish_retries_while_full": retries,
            "applied": sum(applied.values()),
            "distinct": len(applied),
        },
    )
    assert seen["stored_while_full"] == BATCH_MAX_MSGS, report
    assert not seen["producer_done"], f"the producer ended while its stream was full; {report}"
    assert seen["producer_exit"] == 0 and seen["sink_exit"] == 0, report
    assert retries > 0 and "held back" in caplog.text, report
    _check_exactly_once(applied, count=count, report=report)
