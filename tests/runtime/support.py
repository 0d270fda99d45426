"""Running a flow in the runtime tests: the test flows; starting, finishing, waiting on runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from vf_runtime.local.infra import LocalServer

FLOWS = Path(__file__).resolve().parent / "flows"


RUN_TIMEOUT = 90


@dataclass
class FlowRun:
    """The end of one ``run_local`` subprocess."""

    code: int
    output: str


def run_flow(
    graph: str,
    *,
    nats: LocalServer,
    redis: LocalServer,
    env: dict[str, str],
    args: tuple[str, ...] = (),
) -> FlowRun:
    """Run ``flows/<graph>.py`` through ``vf run-local`` against the session servers,
    with ``args`` added to the command line."""
    command = [
        str(Path(sys.executable).with_name("vf")),
        "run-local",
        str(FLOWS / graph),
        "--nats",
        nats.url,
        "--redis",
        redis.url,
        "--stall-timeout",
        "30",
        *args,
    ]
    done = subprocess.run(
        command,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    return FlowRun(code=done.returncode, output=done.stdout + done.stderr)


def start_flow(
    graph: str,
    *,
    nats_url: str,
    redis_url: str,
    env: dict[str, str],
    log: Path,
    args: tuple[str, ...] = (),
) -> subprocess.Popen[bytes]:
    """Start ``vf run-local`` of ``flows/<graph>`` in the background, its output in ``log``,
    with ``args`` added to the command line."""
    command = [
        str(Path(sys.executable).with_name("vf")),
        "run-local",
        str(FLOWS / graph),
        "--nats",
        nats_url,
        "--redis",
        redis_url,
        "--stall-timeout",
        "60",
        *args,
    ]
    with log.open("wb") as out:
        return subprocess.Popen(
            command, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        )


def finish_flow(process: subprocess.Popen[bytes], *, log: Path, timeout: float) -> FlowRun:
    """Wait for a flow started by :func:`start_flow`; kill it (and fail) after ``timeout``."""
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"the flow did not end within {timeout:g}s:\n{log.read_text()[-4000:]}")
    return FlowRun(code=process.returncode, output=log.read_text(errors="replace"))


def wait_until(
    check: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    log: Path | None = None,
) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after ``timeout`` seconds, with the
    tail of ``log`` as it is at that moment (not as it was when the wait began)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            tail = f":\n{log.read_text(errors='replace')[-3000:]}" if log else ""
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}{tail}")
        time.sleep(0.05)


def live_processes_with(variable: str, value: str) -> list[int]:
    """The live (not zombie) processes whose environment holds ``variable=value``: every
    process a run started inherits the variables it was started with (Linux ``/proc``)."""
    needle = f"{variable}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
        except OSError:
            continue
        found.append(int(entry.name))
    return found
