"""Real servers for the runtime tests: nats-server -js and redis-server on free loopback ports.

A missing binary fails the tests with install instructions; nothing here is mocked.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from vf_runtime.localinfra import LocalServer, MissingTool, start_nats, start_redis

FLOWS = Path(__file__).resolve().parent / "flows"
RUN_TIMEOUT = 90


def _start(kind: str, directory: Path) -> LocalServer:
    try:
        return start_nats(directory) if kind == "nats" else start_redis(directory)
    except MissingTool as exc:
        pytest.fail(f"{exc} (scripts/setup installs both)")


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    server = _start("nats", tmp_path_factory.mktemp("nats"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    server = _start("redis", tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@dataclass
class FlowRun:
    """The end of one ``run_local`` subprocess."""

    code: int
    output: str


def run_flow(graph: str, *, nats: LocalServer, redis: LocalServer, env: dict[str, str]) -> FlowRun:
    """Run ``flows/<graph>.py`` through ``vf run-local`` against the session servers."""
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
