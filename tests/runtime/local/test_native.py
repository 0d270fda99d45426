"""A native component under ``vf run-local``, on real nats-server and redis-server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.runtime.support import run_flow
from vf_runtime.local.infra import LocalServer

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it


def test_native_component_runs_its_local_command_and_delivers_everything(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    out = tmp_path / "sink.jsonl"
    env = {"VF_TEST_OUT": str(out), "VF_TEST_FLOW": "native-run", "VF_TEST_COUNT": "30"}
    run = run_flow("native.py", nats=nats_server, redis=redis_server, env=env)
    assert run.code == 0, run.output[-4000:]
    assert "flow finished" in run.output
    assert "[tagger/r0]" in run.output and "[tagger/r1]" in run.output
    items = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(item["i"] for item in items) == list(range(1, 31))
    assert {item["tag"] for item in items} == {"native"}
