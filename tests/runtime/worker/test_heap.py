"""A started worker keeps what start-up made out of the garbage collector's way (ADR 0242):
once ``open()`` has returned, the objects alive are frozen, so a full collection during the
run walks only what the run made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.runtime.support import run_flow
from vf_runtime.local.infra import LocalServer

pytestmark = pytest.mark.slow  # real servers and a whole run


def test_a_started_worker_has_frozen_its_start_up_heap(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    out = tmp_path / "sink.jsonl"
    run = run_flow("heap.py", nats=nats_server, redis=redis_server, env={"VF_TEST_OUT": str(out)})
    assert run.code == 0, run.output[-4000:]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["i"] for line in lines) == list(range(1, 21))
    # next() and consume() run after open(): each worker froze its heap before either
    assert all(line["producer_frozen"] > 0 for line in lines), lines[:2]
    assert all(line["consumer_frozen"] > 0 for line in lines), lines[:2]
