"""A REALTIME producer stopped after its broker is gone ends promptly, on a real nats-server.

In a cluster the broker's pod may go before a producer's (deleting a whole tree at once):
the producer's end-of-stream marker then has nowhere to go. The worker must say so and
exit well inside the pod's grace instead of retrying the marker until the grace runs out.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nats
import pytest

from tests.runtime.support import FLOWS, wait_until
from vf.pipeline import CompileRequest, compile_project
from vf_runtime.broker.naming import RunNames
from vf_runtime.local.infra import free_port, start_nats

pytestmark = pytest.mark.slow  # real servers: make test-fast skips it

WORKER = (sys.executable, "-m", "vf_runtime.worker.replica")
PROMPT = 10.0  # seconds: half the worker's stop grace (20), a third of the pod's (30)


async def _last_seq(url: str, stream: str) -> int:
    client = await nats.connect(url)
    try:
        return int((await client.jetstream().stream_info(stream)).state.last_seq)
    finally:
        await client.close()


def test_a_realtime_producer_stopped_with_its_broker_gone_exits_promptly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VF_TEST_OUT", str(tmp_path / "unused.jsonl"))  # the graph reads it
    plan = compile_project(CompileRequest(graph=str(FLOWS / "live.py"))).plans[0]
    (camera,) = (w for w in plan.workloads if w.node == "camera")
    env = {**os.environ, **dict(camera.env), "PYTHONPATH": str(FLOWS)}
    server = start_nats(tmp_path / "nats", port=free_port())  # stopped below, whatever happens
    env.update(VF_NATS_URL=server.url, VF_HEALTH_PORT="0", PYTHONUNBUFFERED="1")
    log = tmp_path / "camera.log"
    worker: subprocess.Popen[bytes] | None = None
    try:
        with log.open("wb") as out:
            worker = subprocess.Popen(WORKER, env=env, stdout=out, stderr=subprocess.STDOUT)
        stream = RunNames(env["VF_FLOW_ID"], env["VF_RUN_ID"]).stream("camera")
        wait_until(
            lambda: _published(server.url, stream) >= 20,
            timeout=60,
            what="20 items published by the camera",
        )
        server.stop()
        time.sleep(0.5)  # the worker notices the connection is gone
        started = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(timeout=30)
        took = time.monotonic() - started
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait()
        server.stop()
    text = log.read_text()
    assert code == 0, text[-3000:]
    assert took < PROMPT, f"took {took:.1f} s to stop\n{text[-3000:]}"
    assert "end-of-stream marker" in text and "not published" in text, text[-3000:]
    assert "stop grace" not in text, text[-3000:]
    assert "SIGTERM received" in text and "before the source ended" in text, text[-3000:]
    assert "Traceback" not in text, text[-3000:]


def _published(url: str, stream: str) -> int:
    try:
        return asyncio.run(_last_seq(url, stream))
    except Exception:
        return 0
