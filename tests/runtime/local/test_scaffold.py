"""The project ``vf init`` writes runs under ``vf run-local`` on real nats-server and redis."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtime.support import RUN_TIMEOUT
from vf.commands.scaffold import init_project
from vf_runtime.local.infra import LocalServer

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it


def test_scaffold_runs_locally(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    init_project(tmp_path / "starter")
    command = [
        str(Path(sys.executable).with_name("vf")),
        "run-local",
        str(tmp_path / "starter" / "graph.py"),
        "--nats",
        nats_server.url,
        "--redis",
        redis_server.url,
        "--stall-timeout",
        "30",
    ]
    done = subprocess.run(
        command,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "flow finished" in output
    printed = {line.rsplit("] ", 1)[-1] for line in output.splitlines() if "^2 = " in line}
    assert printed == {f"{n}^2 = {n * n}" for n in range(1, 21)}
