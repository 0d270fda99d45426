"""Replica ordinals leased by pods that have none (ENV-6), on a real nats-server.

The relay runs as two processes with the environment a Deployment's pods get: no
``VF_REPLICA_ID``, no ``POD_NAME``, and a host name whose random suffix happens to be
digits. Each must lease its own ordinal, publish its end of stream under it, and the
sink, which expects one marker per relay ordinal, must end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtime.support import FLOWS
from vf.pipeline import CompileRequest, compile_project
from vf_runtime.local.infra import LocalServer

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

WORKER = (sys.executable, "-m", "vf_runtime.worker.replica")


def _start(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(WORKER, env=env, stdout=out, stderr=subprocess.STDOUT)


def test_deployment_replicas_lease_distinct_ordinals_and_a_finite_flow_ends(
    tmp_path: Path, nats_server: LocalServer
) -> None:
    out = tmp_path / "sink.jsonl"
    os.environ["VF_TEST_OUT"] = str(out)
    plan = compile_project(CompileRequest(graph=str(FLOWS / "fanned.py"))).plans[0]
    base = {**os.environ, "PYTHONPATH": str(FLOWS), "VF_NATS_URL": nats_server.url}
    base.update(VF_TEST_OUT=str(out), PYTHONUNBUFFERED="1")
    processes: dict[str, subprocess.Popen[bytes]] = {}
    for workload in plan.workloads:
        env = {**base, **dict(workload.env), "VF_HEALTH_PORT": "0"}  # many on one host
        env.pop("VF_REPLICA_ID", None)
        for replica in range(workload.replicas):
            name = f"{workload.node}-{replica}"
            env["HOSTNAME"] = f"vf-fanned-{workload.node}-5d8f7c6b9-2456{replica}"
            processes[name] = _start(env, tmp_path / f"{name}.log")
    try:
        codes = {name: p.wait(timeout=90) for name, p in sorted(processes.items())}
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
    logs = {name: (tmp_path / f"{name}.log").read_text() for name in processes}
    assert codes == dict.fromkeys(processes, 0), {n: logs[n][-1500:] for n in processes}
    leased = sorted(
        line.split("leased replica ordinal ")[1].split()[0]
        for name in ("relay-0", "relay-1")
        for line in logs[name].splitlines()
        if "leased replica ordinal" in line
    )
    assert leased == ["0", "1"], logs
    assert "leased replica ordinal" not in logs["sink-0"] + logs["numbers-0"]
    assert out.exists() and out.read_text().strip()
