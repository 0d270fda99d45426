"""vf forks only while the forking process runs a single thread.

Forking a process that runs other threads copies locks those threads may hold, and the
child can deadlock on them; from Python 3.12 ``os.fork`` warns of it ("This process is
multi-threaded, use of fork() may lead to deadlocks in the child"). ``vf run-local``
forks twice over: vf forks the graph loader, and the zygote forks every worker (ADR 0170).

The run below has every Python process it starts record, at each fork, how many threads
it runs (``os.register_at_fork`` in a ``sitecustomize`` on ``PYTHONPATH``), so the test
means the same on every Python; on 3.12 and later it also asserts that the warning,
turned on for every process, was never printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtime.support import FLOWS

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

HOOK = """
import os, sys, threading

def _record():
    path = os.environ.get("VF_TEST_FORK_LOG")
    if path:
        with open(path, "a") as log:
            log.write(f"{os.getpid()} {threading.active_count()} {' '.join(sys.argv)}\\n")

os.register_at_fork(before=_record)
"""


def test_run_local_forks_only_while_single_threaded(tmp_path: Path) -> None:
    hooks, log = tmp_path / "hooks", tmp_path / "forks.log"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(HOOK)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(hooks), os.environ.get("PYTHONPATH")])),
        "PYTHONWARNINGS": "always::DeprecationWarning",
        "VF_TEST_FORK_LOG": str(log),
        "VF_TEST_OUT": str(tmp_path / "sink.jsonl"),
        "VF_TEST_FLOW": "forks",
        "VF_TEST_COUNT": "5",
        "TMPDIR": str(tmp_path),
    }
    command = [sys.executable, "-W", "always::DeprecationWarning", "-m", "vf", "run-local"]
    done = subprocess.run(
        [*command, str(FLOWS / "linear.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    forks = [line.split(" ", 2) for line in log.read_text().splitlines()]
    print(f"[forks] {len(forks)}: " + "; ".join(f"pid {p} threads {n}" for p, n, _ in forks))
    loader = [f for f in forks if " run-local " in f" {f[2]} "]
    zygote = [f for f in forks if Path(f[2].split(" ")[0]).stem == "zygote"]
    assert loader, "vf forked no graph loader"
    assert len(zygote) >= 3, "the zygote forked fewer workers than the flow has replicas"
    assert [f for f in forks if f[1] != "1"] == [], "a fork from a process running threads"
    assert "multi-threaded" not in output, output[-4000:]
