"""The zygote: a worker it forks starts as ``python -m MODULE`` would, and lives and ends
under the same supervision.

A probe module reports what a worker could observe of how it was started (its module
name and argv, import path, environment, open descriptors, threads, event loop, signal
dispositions, process group, output buffering, warnings) and exits with a chosen code.
The probe runs once as a fresh process and once forked by a zygote, and the two reports
must be equal.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime.support import wait_until
from vf_runtime.local.supervisor import (
    ReplicaSpec,
    SuperviseOptions,
    SupervisionPolicy,
    Supervisor,
)
from vf_runtime.local.zygote import ForkedWorker, Zygote

PROBE = """
import asyncio, json, os, signal, sys, threading, time, warnings

def report():
    fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    try:
        asyncio.get_running_loop()
        loop = "running"
    except RuntimeError:
        loop = "none"
    handlers = {
        name: str(signal.getsignal(getattr(signal, name)))
        for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGCHLD", "SIGPIPE")
    }
    return {
        "name": __name__,
        "argv": sys.argv,
        "path": sys.path,
        "env": {k: v for k, v in os.environ.items() if k.startswith("PROBE_")},
        "fds": len(fds),
        "threads": threading.active_count(),
        "loop": loop,
        "signals": handlers,
        "group": os.getpgid(0),
        "session": os.getsid(0),
        "write_through": sys.stdout.write_through,
        "warnings": [str(w) for w in warnings.filters[:3]],
        "stderr_fd": sys.stderr.fileno(),
    }

if __name__ == "__main__":
    mode = os.environ["PROBE_MODE"]
    if mode == "report":
        print(json.dumps(report()))
        print("to stderr", file=sys.stderr)
        sys.exit(int(os.environ["PROBE_EXIT"]))
    parent = os.getppid()
    print("waiting", flush=True)
    while os.getppid() == parent:  # as a worker under vf run-local does
        time.sleep(0.05)
    sys.exit(0)
"""


@pytest.fixture
def probe(tmp_path: Path) -> Iterator[tuple[Zygote, dict[str, str]]]:
    (tmp_path / "vfprobe.py").write_text(PROBE)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    zygote = Zygote.start(env, group=0, module="vfprobe")  # a group of its own, as a guardian
    try:
        yield zygote, env
    finally:
        zygote.close()


def _forked(zygote: Zygote, env: dict[str, str]) -> ForkedWorker:
    worker = zygote.spawn(env)
    assert worker is not None, "the zygote did not start"
    return worker


def _report(output: str) -> dict[str, object]:
    lines = output.splitlines()
    assert "to stderr" in lines, output
    found: dict[str, object] = json.loads(lines[0])
    return found


def test_a_forked_worker_starts_as_a_fresh_one_would(
    probe: tuple[Zygote, dict[str, str]],
) -> None:
    zygote, base = probe
    env = {**base, "PROBE_MODE": "report", "PROBE_EXIT": "3", "PROBE_NAME": "one"}
    fresh = subprocess.run(
        [sys.executable, "-m", "vfprobe"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        process_group=zygote.process.pid,  # the group run-local's workers join
        check=False,
    )
    worker = _forked(zygote, env)
    output = worker.stdout.read()
    assert worker.wait(timeout=30) == fresh.returncode == 3
    assert _report(output) == _report(fresh.stdout)
    assert _report(output)["env"] == {
        "PROBE_MODE": "report",
        "PROBE_EXIT": "3",
        "PROBE_NAME": "one",
    }
    assert worker.pid is not None and worker.pid != zygote.process.pid


def test_each_forked_worker_gets_its_own_environment(
    probe: tuple[Zygote, dict[str, str]],
) -> None:
    zygote, base = probe
    workers = [
        _forked(zygote, {**base, "PROBE_MODE": "report", "PROBE_EXIT": str(n)}) for n in (0, 5)
    ]
    outputs = [worker.stdout.read() for worker in workers]
    assert [worker.wait(timeout=30) for worker in workers] == [0, 5]
    assert [_report(out)["env"] for out in outputs] == [
        {"PROBE_MODE": "report", "PROBE_EXIT": "0"},
        {"PROBE_MODE": "report", "PROBE_EXIT": "5"},
    ]


def test_a_forked_worker_is_signalled_and_its_end_reported(
    probe: tuple[Zygote, dict[str, str]],
) -> None:
    zygote, base = probe
    worker = _forked(zygote, {**base, "PROBE_MODE": "wait"})
    assert worker.stdout.readline() == "waiting\n"
    assert worker.poll() is None
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == -signal.SIGTERM
    worker.kill()  # once it has ended, a signal goes nowhere (its pid may be reused)


def test_forked_workers_stop_when_vf_is_gone(probe: tuple[Zygote, dict[str, str]]) -> None:
    zygote, base = probe
    worker = _forked(zygote, {**base, "PROBE_MODE": "wait"})
    assert worker.stdout.readline() == "waiting\n"
    wait_until(lambda: worker.pid is not None, timeout=30, what="the zygote to report the pid")
    pid = worker.pid
    assert pid is not None
    zygote.sock.shutdown(socket.SHUT_RDWR)  # as the kernel does to the socket of a dead vf
    assert zygote.process.wait(timeout=30) == 0
    assert worker.wait(timeout=30) < 0  # the zygote could not report it: counted as lost
    try:
        wait_until(lambda: not _alive(pid), timeout=30, what="the orphaned worker to stop")
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_zygote_serves_only_what_it_would_start_itself(
    probe: tuple[Zygote, dict[str, str]],
) -> None:
    zygote, base = probe
    command = (sys.executable, "-m", "vfprobe")
    assert zygote.serves(command, {**base, "VF_NODE_NAME": "a", "CUDA_VISIBLE_DEVICES": "1"})
    assert not zygote.serves((sys.executable, "-m", "other"), base)
    assert not zygote.serves(command, {**base, "PYTHONHASHSEED": "7"})
    assert not zygote.serves(command, {**base, "PYTHONPATH": "/elsewhere"})
    assert not zygote.serves(command, {**base, "LC_ALL": "C.UTF-8", "LANG": "x"})


def test_a_zygote_that_cannot_import_its_module_forks_nothing(tmp_path: Path) -> None:
    zygote = Zygote.start(dict(os.environ), group=0, module="vf_no_such_module")
    try:
        started = time.monotonic()
        assert zygote.spawn(dict(os.environ)) is None
        assert time.monotonic() - started < 30
        assert not zygote.serves((sys.executable, "-m", "vf_no_such_module"), os.environ)
    finally:
        zygote.close()


def test_the_supervisor_runs_forked_workers_like_fresh_ones(
    probe: tuple[Zygote, dict[str, str]],
) -> None:
    zygote, base = probe
    command = (sys.executable, "-m", "vfprobe")
    replicas = [
        ReplicaSpec(
            node=node,
            replica=0,
            env={**base, "PROBE_MODE": "report", "PROBE_EXIT": code},
            command=command,
        )
        for node, code in (("ok", "0"), ("bad", "9"))
    ]
    out = io.StringIO()
    options = SuperviseOptions(
        announce_stop=lambda: None,
        policy=SupervisionPolicy(max_restarts=0),
        stall_seconds=None,
        output=out,
        zygote=zygote,
    )
    outcome = Supervisor(replicas, options).run()
    assert outcome.status == "lost" and outcome.lost == ["bad/r0"]
    assert "[ok/r0] to stderr" in out.getvalue()
    assert '[bad/r0] {"name": "__main__"' in out.getvalue()
