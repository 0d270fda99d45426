"""Real servers for the runtime tests: nats-server -js and redis-server on free loopback ports.

A missing binary fails the tests with install instructions; nothing here is mocked.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from vf_runtime.local.infra import LocalServer, MissingTool, start_nats, start_redis


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
