"""Helpers of the operator-command tests: fresh servers, ``vf`` in-process, broker reads."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import nats
import pytest
from click.testing import CliRunner
from nats.js import JetStreamContext

from tests.runtime.support import FlowRun
from vf.cli import cli
from vf_runtime.local.infra import LocalServer, MissingTool, start_nats, start_redis

T = TypeVar("T")


@dataclass(frozen=True)
class Servers:
    nats: LocalServer
    redis: LocalServer


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def fresh_servers(directory: Path) -> Iterator[Servers]:
    """A nats-server and a redis-server of their own: no other test's runs on them."""
    try:
        servers = Servers(start_nats(directory / "nats"), start_redis(directory / "redis"))
    except MissingTool as exc:
        pytest.fail(f"{exc} (scripts/setup installs both)")
    yield servers
    servers.nats.stop()
    servers.redis.stop()


def vf(*args: str, nats_url: str | None = None, stdin: bytes | None = None) -> Result:
    """``vf ARGS`` in this process (``--nats`` appended when given)."""
    argv = [*args, *(["--nats", nats_url] if nats_url else [])]
    done = CliRunner().invoke(cli, argv, input=stdin)
    return Result(code=done.exit_code, out=done.stdout, err=done.stderr)


def run_identity(run: FlowRun, flow: str) -> tuple[str, str]:
    """``(run id, generation)`` that ``vf run-local`` printed."""
    found = re.search(rf"\[vf\] running flow {flow} run (\S+) generation (\S+)", run.output)
    assert found, run.output[-3000:]
    return found.group(1), found.group(2)


def with_js(url: str, body: Callable[[JetStreamContext], Awaitable[T]]) -> T:
    async def main() -> T:
        client = await nats.connect(url)
        try:
            return await body(client.jetstream())
        finally:
            await client.close()

    return asyncio.run(main())


def stream_names(url: str) -> list[str]:
    async def body(js: JetStreamContext) -> list[str]:
        return sorted(i.config.name or "" for i in await js.streams_info())

    return with_js(url, body)
