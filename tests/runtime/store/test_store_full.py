"""A full payload store or JetStream store is back-pressure and a named condition (ADR 0208).

A real Valkey with ``noeviction`` (the shipped stores' policy) is made full in the middle
of a BATCH run by lowering its ``maxmemory`` below what it holds: every write is refused
with ``OOM command not allowed when used memory > 'maxmemory'``. Each test prints the
counts it saw.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import subprocess
import time
from pathlib import Path

import nats
import pytest
import redis

from tests.runtime.support import FLOWS, finish_flow, start_flow, wait_until
from tests.runtime.worker.test_faults import (
    _applied,
    _check_exactly_once,
    _dead_letters,
    _env,
    _lines,
    _report,
    _summaries,
    _total,
)
from vf.commands.run_local.command import provision_topology
from vf.pipeline import CompileRequest, compile_project
from vf_runtime.broker.naming import RunNames
from vf_runtime.broker.provision import provision
from vf_runtime.local.infra import LocalServer, free_port, nats_server_binary, start_redis
from vf_runtime.worker.replica import run_worker

pytestmark = pytest.mark.slow

COUNT, SIZE = 80, 64 * 1024  # every item offloaded (inline limit 64 B)


def _refused_writes(client: redis.Redis) -> int:
    """How many commands the store refused with OOM (Valkey's own error statistics)."""
    stats = client.info("errorstats")
    return int(stats.get("errorstat_OOM", {}).get("count", 0))


def _run_with_full_store(
    tmp_path: Path, nats: LocalServer, *, flow: str, freed: bool, env: dict[str, str]
) -> dict[str, object]:
    port = free_port()
    store = start_redis(tmp_path / "redis", port=port)
    client = redis.Redis(port=port)
    out, log = tmp_path / "sink.jsonl", tmp_path / "run.log"
    env = {**_env(tmp_path, flow, COUNT, VF_TEST_SIZE=str(SIZE)), **env}
    env["VF_MAX_INLINE_PAYLOAD_BYTES"] = "64"
    process = start_flow("bulk.py", nats_url=nats.url, redis_url=store.url, env=env, log=log)
    try:
        wait_until(lambda: _lines(out) >= 10, timeout=60, what="10 items at the sink")
        client.config_set("maxmemory", "1")  # below what it holds: every write refused
        full_at = _lines(out)
        wait_until(lambda: _refused_writes(client) >= 3, timeout=30, what="refused writes")
        time.sleep(3.0)
        while_full = _lines(out) - full_at
        if freed:
            client.config_set("maxmemory", "0")
        run = finish_flow(process, log=log, timeout=150)
        refused = _refused_writes(client)
    finally:
        if process.poll() is None:
            process.kill()
        client.close()
        store.stop()
    summaries = _summaries(run.output)
    applied = _applied(out)
    return {
        "run": run,
        "applied": applied,
        "counts": {
            "items": COUNT,
            "applied_before_full": full_at,
            "applied_while_full": while_full,
            "writes_refused_oom": refused,
            "applied": sum(applied.values()),
            "distinct": len(applied),
            "store_retries": _total(summaries, "store_retries"),
            "failed": _total(summaries, "failed"),
            "dead_letters": asyncio.run(_dead_letters(nats.url, flow)),
            "named_full": run.output.count("error[VF_BLOB_STORE_FULL]"),
            "node_oom_codes": len(re.findall(r"VF_NODE_(?:OUTOFMEMORY|RESPONSE)ERROR", run.output)),
            "exit": run.code,
        },
    }


def test_a_full_store_holds_the_flow_back_until_space_returns(
    tmp_path: Path, nats_server: LocalServer
) -> None:
    """The store refuses every write for a while, then takes them again: nothing is lost."""
    seen = _run_with_full_store(tmp_path, nats_server, flow="storefull", freed=True, env={})
    counts = seen["counts"]
    assert isinstance(counts, dict)
    report = _report("store-full-then-freed", counts)
    run = seen["run"]
    assert counts["writes_refused_oom"] > 0, report
    assert counts["failed"] == 0 and counts["dead_letters"] == 0, report
    assert counts["node_oom_codes"] == 0, report
    assert counts["store_retries"] > 0, report
    assert "VF_BLOB_STORE_FULL during" in run.output, report  # type: ignore[attr-defined]
    assert counts["exit"] == 0, run.output[-4000:]  # type: ignore[attr-defined]
    _check_exactly_once(seen["applied"], count=COUNT, report=report)  # type: ignore[arg-type]


def test_a_store_that_stays_full_stops_the_replicas_by_name(
    tmp_path: Path, nats_server: LocalServer
) -> None:
    """The store never takes a write again: each replica stops on ``VF_BLOB_STORE_FULL``
    after its patience, with nothing judged the node's failure and nothing dead-lettered."""
    seen = _run_with_full_store(
        tmp_path,
        nats_server,
        flow="storenever",
        freed=False,
        env={"VF_STORE_FULL_SECONDS": "2"},
    )
    counts = seen["counts"]
    assert isinstance(counts, dict)
    report = _report("store-full-for-good", counts)
    run = seen["run"]
    assert counts["exit"] != 0, report
    assert counts["named_full"] > 0, report
    assert counts["node_oom_codes"] == 0, report
    assert counts["failed"] == 0 and counts["dead_letters"] == 0, report
    assert "Traceback" not in run.output, run.output[-4000:]  # type: ignore[attr-defined]
    assert counts["distinct"] < COUNT, report
    # an applied item whose record cannot be written is acked, not handed back to be re-applied
    assert counts["applied"] == counts["distinct"], report


def _start_small_nats(directory: Path, *, max_file_store: str) -> LocalServer:
    """``nats-server -js`` whose file store may hold only ``max_file_store`` in all."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = directory / "nats.conf"
    conf.write_text(
        f"port: {port}\nhost: 127.0.0.1\n"
        f"jetstream {{ store_dir: {directory / 'js'}, max_file_store: {max_file_store} }}\n"
    )
    log = directory / "nats.log"
    process = subprocess.Popen(
        [nats_server_binary(), "-c", str(conf), "-l", str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return LocalServer("nats-server", f"nats://127.0.0.1:{port}", port, process, log=log).ready()


def test_a_full_jetstream_store_is_named_and_the_flow_resumes_when_acks_free_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The server's file store (2 MB) fills with the producer's backlog before any reader runs:
    publishes are refused with JetStream's 10023, the producer reports VF_BROKER_FULL and waits;
    once the reader acks (interest retention frees the space), every item arrives."""
    count, size = 60, 100_000  # 6 MB of inline payloads for a 2 MB store
    server = _start_small_nats(tmp_path / "nats", max_file_store="2MB")
    out = tmp_path / "sink.jsonl"
    for key, value in _env(tmp_path, "brokerfull", count, VF_TEST_SIZE=str(size)).items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(FLOWS))
    caplog.set_level(logging.INFO, logger="vf")
    plan = compile_project(CompileRequest(graph=str(FLOWS / "flood.py"))).plans[0]
    stream = RunNames(plan.flow_id, plan.run_id).stream("numbers")

    def env(node: str) -> dict[str, str]:
        values = dict(next(w for w in plan.workloads if w.node == node).env)
        values.update(VF_NATS_URL=server.url, VF_REPLICA_ID="0", VF_HEALTH_PORT="0")
        return values

    async def body() -> dict[str, object]:
        client = await nats.connect(server.url)
        js = client.jetstream()
        try:
            await provision(js, provision_topology(plan))
            producer = asyncio.create_task(run_worker(env("numbers")))
            deadline = time.monotonic() + 60
            while "10023" not in caplog.text and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)  # the producer keeps trying; the store stays full
            info = await js.stream_info(stream)
            held = {
                "stored_while_full": int(info.state.messages),
                "producer_done": producer.done(),
            }
            sink = asyncio.create_task(run_worker(env("sink")))
            codes = await asyncio.wait_for(asyncio.gather(producer, sink), timeout=120)
            return {**held, "producer_exit": codes[0], "sink_exit": codes[1]}
        finally:
            await client.close()

    try:
        seen = asyncio.run(body())
    finally:
        server.stop()
    applied = _applied(out)
    full = sum(int(m) for m in re.findall(r"summary: .*broker_full_retries=(\d+)", caplog.text))
    report = _report(
        "broker-full",
        {
            "items": count,
            **seen,
            "refused_10023": caplog.text.count("10023"),
            "named_full": caplog.text.count("VF_BROKER_FULL"),
            "broker_full_retries": full,
            "applied": sum(applied.values()),
            "distinct": len(applied),
        },
    )
    assert 0 < int(seen["stored_while_full"]) < count, report  # type: ignore[call-overload]
    assert not seen["producer_done"], f"the producer ended while the store was full; {report}"
    assert seen["producer_exit"] == 0 and seen["sink_exit"] == 0, report
    assert "VF_BROKER_FULL" in caplog.text and full > 0, report
    assert sorted(applied) == list(range(1, count + 1)), report


def test_a_stream_at_its_byte_limit_holds_its_writer_back_by_name(
    tmp_path: Path,
    nats_server: LocalServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """STREAM-6 on a broker with room to spare: the stream's own max_bytes (2 MiB) refuses the
    producer's backlog (discard new, 10077 "maximum bytes exceeded"), the producer reports
    VF_BROKER_FULL and waits; once the reader acks, every item arrives."""
    count, size, limit = 60, 100_000, 2 * 1024 * 1024
    out = tmp_path / "sink.jsonl"
    for key, value in _env(tmp_path, "streambytes", count, VF_TEST_SIZE=str(size)).items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(FLOWS))
    caplog.set_level(logging.INFO, logger="vf")
    plan = compile_project(CompileRequest(graph=str(FLOWS / "flood.py"))).plans[0]
    stream = RunNames(plan.flow_id, plan.run_id).stream("numbers")

    def env(node: str) -> dict[str, str]:
        values = dict(next(w for w in plan.workloads if w.node == node).env)
        values.update(VF_NATS_URL=nats_server.url, VF_REPLICA_ID="0", VF_HEALTH_PORT="0")
        values["VF_STREAM_MAX_BYTES"] = str(limit)
        return values

    async def body() -> dict[str, object]:
        client = await nats.connect(nats_server.url)
        js = client.jetstream()
        try:
            topology = dataclasses.replace(provision_topology(plan), stream_max_bytes=limit)
            await provision(js, topology)
            configured = (await js.stream_info(stream)).config.max_bytes
            producer = asyncio.create_task(run_worker(env("numbers")))
            deadline = time.monotonic() + 60
            while "VF_BROKER_FULL" not in caplog.text and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            await asyncio.sleep(1.0)  # the producer keeps trying; the stream stays full
            info = await js.stream_info(stream)
            held = {
                "max_bytes": configured,
                "stored_while_full": int(info.state.messages),
                "bytes_while_full": int(info.state.bytes),
                "producer_done": producer.done(),
            }
            sink = asyncio.create_task(run_worker(env("sink")))
            codes = await asyncio.wait_for(asyncio.gather(producer, sink), timeout=120)
            return {**held, "producer_exit": codes[0], "sink_exit": codes[1]}
        finally:
            await client.close()

    seen = asyncio.run(body())
    applied = _applied(out)
    full = sum(int(m) for m in re.findall(r"summary: .*broker_full_retries=(\d+)", caplog.text))
    report = _report(
        "stream-bytes",
        {
            "items": count,
            **seen,
            "maximum_bytes_refusals": caplog.text.count("maximum bytes exceeded"),
            "broker_full_retries": full,
            "applied": sum(applied.values()),
        },
    )
    assert seen["max_bytes"] == limit, report
    assert 0 < int(seen["stored_while_full"]) < count, report  # type: ignore[call-overload]
    assert int(seen["bytes_while_full"]) <= limit, report  # type: ignore[call-overload]
    assert not seen["producer_done"], f"the producer ended while its stream was full; {report}"
    assert seen["producer_exit"] == 0 and seen["sink_exit"] == 0, report
    assert "VF_BROKER_FULL" in caplog.text and full > 0, report
    assert sorted(applied) == list(range(1, count + 1)), report
