"""No orphans: ``vf run-local`` with embedded servers, signalled at several moments.

Each case starts the real command and sends one signal at one point: in the first half
second, as soon as the run directory exists, once the broker is up, or while items
flow. Then it looks at the whole machine: no process that inherited the case's marker
variable may be alive, and the run directory under the case's own TMPDIR must be gone.
SIGKILL gives vf no chance to clean up; the run's guardian must do it alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.runtime.support import FLOWS, wait_until

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGHUP": signal.SIGHUP, "SIGINT": signal.SIGINT}
SIGNALS["SIGKILL"] = signal.SIGKILL
POINTS = ("early", "run-dir", "broker-up", "flowing")
REAP_SECONDS = 20.0


def _marked(marker: str) -> list[str]:
    """Command lines of live processes whose environment holds ``VF_ORPHAN_MARK=marker``."""
    needle = f"VF_ORPHAN_MARK={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return found


def _kill_marked(marker: str) -> None:
    needle = f"VF_ORPHAN_MARK={marker}".encode()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle in (entry / "environ").read_bytes().split(b"\0"):
                os.kill(int(entry.name), signal.SIGKILL)
        except OSError:
            continue


def _reached(point: str, log: Path, scratch: Path) -> bool:
    if point == "run-dir":  # the guardian made it; no server started yet, or just now
        return any(p.name.startswith("vf-run-") for p in scratch.iterdir())
    text = log.read_text(errors="replace") if log.exists() else ""
    return {
        "broker-up": "[vf] started nats-server" in text,
        "flowing": "[vf] progress:" in text,
    }[point]


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("name", list(SIGNALS))
def test_a_signalled_run_leaves_nothing_behind(tmp_path: Path, name: str, point: str) -> None:
    marker = uuid.uuid4().hex
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    log = tmp_path / "run.log"
    env = {
        **os.environ,
        "TMPDIR": str(scratch),
        "VF_ORPHAN_MARK": marker,
        "VF_TEST_OUT": str(tmp_path / "sink.jsonl"),
        "VF_TEST_COUNT": "400",
    }
    command = [str(Path(sys.executable).with_name("vf")), "run-local", str(FLOWS / "paced.py")]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, env=env, stdout=sink, stderr=subprocess.STDOUT)
    if point == "early":
        time.sleep(0.5)
    else:
        wait_until(lambda: _reached(point, log, scratch), timeout=60, what=point)
    process.send_signal(SIGNALS[name])
    code = process.wait(timeout=60)
    try:
        wait_until(lambda: not _marked(marker), timeout=REAP_SECONDS, what="no process left")
    finally:  # a failing case must not leave its servers running on the machine
        _kill_marked(marker)
    left = [p.name for p in scratch.iterdir() if p.name.startswith("vf-run-")]
    print(f"[{name} at {point}] exit {code}, left: {left or 'nothing'}")
    assert not left, log.read_text(errors="replace")[-3000:]
    if name == "SIGKILL":
        assert code == -signal.SIGKILL
    elif point not in ("early", "run-dir"):
        assert code == 130, log.read_text(errors="replace")[-3000:]
        assert "interrupted" in log.read_text(errors="replace")
    else:  # before vf installed its handlers the signal's default action ends it
        assert code in (130, -SIGNALS[name]), log.read_text(errors="replace")[-3000:]


def test_a_run_whose_reader_goes_away_stops_and_leaves_nothing(tmp_path: Path) -> None:
    """``vf run-local … | head``: the pipe closes once the workers run. The run must stop
    (as on Ctrl-C) and leave nothing behind, not hang with its watchers dead on EPIPE."""
    marker = uuid.uuid4().hex
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        "VF_ORPHAN_MARK": marker,
        "VF_TEST_OUT": str(tmp_path / "sink.jsonl"),
        "VF_TEST_COUNT": "400",
    }
    command = [str(Path(sys.executable).with_name("vf")), "run-local", str(FLOWS / "paced.py")]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    while not process.stdout.readline().startswith(b"[vf] running flow"):
        pass
    process.stdout.close()  # what `head` does once it has its lines
    try:
        code = process.wait(timeout=60)
        wait_until(lambda: not _marked(marker), timeout=REAP_SECONDS, what="no process left")
    finally:
        _kill_marked(marker)
        if process.poll() is None:
            process.kill()
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith("vf-run-")]
    print(f"[reader gone] exit {code}, left: {left or 'nothing'}")
    assert code != 0 and not left


SIGNALLED_AS_PROVISIONING_ENDS = """
import os, signal, sys
from vf.commands.exits import run_body
from vf.commands.run_local import command
from vf.commands.run_local.command import RunLocalRequest, run_local

provisioned = command.provision_run

async def provision_then_signal(*args, **kwargs):
    await provisioned(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGINT)  # lands before the event loop looks again

command.provision_run = provision_then_signal
run_body(lambda: run_local(RunLocalRequest(graph=sys.argv[1], stall_seconds=30)))
"""


def test_a_stop_signal_as_provisioning_ends_stops_the_run(tmp_path: Path) -> None:
    """A Ctrl-C that lands in the last instructions of provisioning, after the event loop
    last looked for signals, still stops the run; the run once went on to its end."""
    env = {**os.environ, "VF_TEST_OUT": str(tmp_path / "sink.jsonl"), "VF_TEST_COUNT": "40"}
    command = [sys.executable, "-c", SIGNALLED_AS_PROVISIONING_ENDS, str(FLOWS / "paced.py")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=90, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 130, output[-3000:]
    assert "interrupted" in output and "running flow" not in output, output[-3000:]
