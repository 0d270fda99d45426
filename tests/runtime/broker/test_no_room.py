"""A stream whose byte limit does not fit what is left of the broker's store (ADR 0234).

nats-server reserves a stream's ``max_bytes`` against its ``max_file_store`` when the
stream is made or its limit raised, and refuses one that does not fit with 10047
"insufficient storage resources available". The provision Job and a worker name it
``VF_BROKER_NO_ROOM`` with its fix and exit 3, instead of a traceback. The broker here
is a real nats-server whose file store may hold 8 MB, the streams' limit 64 MiB.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import nats
import pytest

from tests.runtime.store.test_store_full import _start_small_nats
from tests.runtime.support import FLOWS
from tests.runtime.worker.test_faults import _env
from vf.pipeline import CompileRequest, compile_project
from vf_runtime.broker.client import BrokerError
from vf_runtime.broker.naming import RunNames
from vf_runtime.broker.streams import ensure_stream
from vf_runtime.broker.topology import stream_config
from vf_runtime.constants import BATCH

pytestmark = pytest.mark.slow

STORE, LIMIT = "8MB", str(64 * 1024 * 1024)
NODES = [
    {"name": "src", "parents": [], "replicas": 1, "has_children": True, "max_deliver": 2},
    {"name": "out", "parents": ["src"], "replicas": 1, "has_children": False, "max_deliver": 2},
]


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def _assert_named(process: subprocess.CompletedProcess[str], stream: str) -> None:
    out = process.stdout + process.stderr
    assert process.returncode == 3, out
    assert "Traceback" not in out, out
    assert "error[VF_BROKER_NO_ROOM]" in out, out
    assert f"stream {stream} of max_bytes {LIMIT}" in out, out
    assert "= fix:" in out and "broker.storage_size" in out, out
    assert "broker.stream_max_bytes" in out and "--superseded" in out, out


def test_provision_names_a_stream_the_store_has_no_room_for(tmp_path: Path) -> None:
    server = _start_small_nats(tmp_path / "nats", max_file_store=STORE)
    topology = tmp_path / "topology"
    topology.mkdir()
    (topology / "nodes-000.jsonl").write_text("".join(json.dumps(n) + "\n" for n in NODES))
    env = {
        **os.environ,
        "VF_FLOW_ID": "noroom",
        "VF_FLOW_TYPE": "batch",
        "VF_RUN_ID": "r1",
        "VF_TOPOLOGY_DIR": str(topology),
        "VF_STREAM_MAX_BYTES": LIMIT,
    }
    try:
        process = subprocess.run(
            [_bin("vf-provision"), "--nats", server.url, "--timeout", "10"],
            env=env,
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.stop()
    print(f"[no-room] vf-provision exit {process.returncode}: {process.stderr.strip()}")
    _assert_named(process, RunNames("noroom", "r1").stream("src"))


def test_a_worker_names_a_stream_the_store_has_no_room_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in _env(tmp_path, "noroomw", 10).items():
        monkeypatch.setenv(key, value)
    monkeypatch.syspath_prepend(str(FLOWS))
    plan = compile_project(CompileRequest(graph=str(FLOWS / "bulk.py"))).plans[0]
    server = _start_small_nats(tmp_path / "nats", max_file_store=STORE)
    env = {**os.environ, **dict(next(w for w in plan.workloads if w.node == "numbers").env)}
    env.update(
        VF_NATS_URL=server.url,
        VF_STREAM_MAX_BYTES=LIMIT,
        VF_GENERATION="g1",
        VF_REPLICA_ID="0",
        VF_HEALTH_PORT="0",
        PYTHONPATH=os.pathsep.join([str(FLOWS), os.environ.get("PYTHONPATH", "")]),
    )
    try:
        process = subprocess.run(
            [_bin("vf-worker")], env=env, check=False, capture_output=True, text=True, timeout=90
        )
    finally:
        server.stop()
    print(f"[no-room] vf-worker exit {process.returncode}")
    # the flow's dead-letter stream, which it ensures first, takes the same limit (ADR 0239)
    _assert_named(process, RunNames("noroomw", plan.run_id, "g1").dlq_stream())


def test_raising_a_streams_limit_past_the_room_left_is_named(tmp_path: Path) -> None:
    """The update path of ensure (a stream made before its byte limit, STREAM-6)."""
    server = _start_small_nats(tmp_path / "nats", max_file_store=STORE)
    names = RunNames("noroomu", "r1")

    async def body() -> BrokerError:
        client = await nats.connect(server.url)
        js = client.jetstream()
        try:
            for limit in (0, int(LIMIT)):
                config = stream_config(names, "src", flow_type=BATCH, replicas=1, max_bytes=limit)
                try:
                    await ensure_stream(js, config)
                except BrokerError as exc:
                    return exc
            raise AssertionError("the broker took a limit past its store")
        finally:
            await client.close()

    try:
        error = asyncio.run(body())
    finally:
        server.stop()
    assert error.code == "VF_BROKER_NO_ROOM", error.render()
    assert "10047" in str(error) and "broker.storage_size" in error.fix
