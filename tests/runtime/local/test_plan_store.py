"""``vf run-local`` runs the payload store its plan has: with ``payload_store.profile: none``
(vf.yaml's default) none is started, and an item above the inline limit fails as it does in
the cluster, naming the vf.yaml key that gives the environment a store; with a store profile
an embedded Redis stands in for it; ``--redis`` is used as given."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtime.support import FLOWS, RUN_TIMEOUT
from vf_runtime.local.infra import LocalServer

GRAPH = """\
import os

from testnodes import Numbers, Record

from vf import BATCH, Flow


def build_flow() -> Flow:
    numbers = Numbers(count=3, size=600 * 1024, name="numbers")  # above the 512 KiB inline
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(numbers)
    return Flow([sink], flow_type=BATCH, flow_id="store-plan")
"""


def _run(
    tmp_path: Path, nats: LocalServer, profile: str, *, redis: LocalServer | None = None
) -> tuple[int, str, Path]:
    """``vf run-local`` of GRAPH in environment ``local`` with ``payload_store.profile``;
    ``--redis`` only when ``redis`` is given."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(FLOWS / "testnodes.py", project / "testnodes.py")
    (project / "graph.py").write_text(GRAPH)
    env = {"images": {"default": "registry.example.com/vf/runtime-tests:0"}}
    env["payload_store"] = {"profile": profile}
    (project / "vf.yaml").write_text(json.dumps({"environments": {"local": env}}))
    out = tmp_path / "sink.jsonl"
    command = [str(Path(sys.executable).with_name("vf")), "run-local", str(project / "graph.py")]
    command += ["--nats", nats.url, "--stall-timeout", "30"]
    if redis is not None:
        command += ["--redis", redis.url]
    done = subprocess.run(
        command,
        env={**os.environ, "VF_TEST_OUT": str(out), "VF_RETRY_DELAY_CAP_SECONDS": "0.2"},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr, out


def _applied(out: Path) -> list[int]:
    lines = out.read_text().splitlines() if out.exists() else []
    return sorted(json.loads(line)["i"] for line in lines)


@pytest.mark.slow  # above the fast tier's 1.5 s on a busy 2-core machine
def test_no_store_in_the_plan_is_no_store_in_the_run(
    tmp_path: Path, nats_server: LocalServer
) -> None:
    code, output, out = _run(tmp_path, nats_server, "none")
    print(output[-4000:])
    assert "started redis-server" not in output and "started valkey-server" not in output
    assert "[vf] no payload store: environment local has payload_store.profile none" in output
    # A producer cannot set its item aside: it fails on it, as its Job's pods would, until
    # the restart budget is spent and the node is lost.
    assert code == 4 and "flow lost node(s): numbers/r0" in output, output[-4000:]
    assert "exceeds the inline limit of 524288 bytes and the environment has no payload " in output
    assert "payload_store: {profile: dev}" in output  # the vf.yaml key to set
    assert _applied(out) == []


def test_a_store_in_the_plan_is_an_embedded_one_in_the_run(
    tmp_path: Path, nats_server: LocalServer
) -> None:
    code, output, out = _run(tmp_path, nats_server, "dev")
    print(output[-4000:])
    assert code == 0, output[-4000:]
    assert "[vf] started redis-server" in output or "[vf] started valkey-server" in output
    assert _applied(out) == [1, 2, 3]


def test_a_store_given_to_a_plan_without_one_is_used_and_the_difference_said(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    """``--redis`` is the user's choice: the run uses it, and says the cluster has none."""
    code, output, out = _run(tmp_path, nats_server, "none", redis=redis_server)
    print(output[-4000:])
    assert code == 0, output[-4000:]
    assert _applied(out) == [1, 2, 3]
    assert "[vf] payload store: the one --redis names, though environment local has " in output
