"""A BATCH producer killed mid-run, with an idempotent sink downstream, on real servers
through ``vf run-local`` (ADR 0215): declared replayable, its restart re-emits the same
ids and each item is applied once (exit 0); not declared so, its new life re-emits items
under new ids that the sink applies again, and the run says so and ends with exit 9."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.runtime.support import run_flow
from vf_runtime.local.infra import LocalServer

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it
COUNT, CRASH_AT = 400, 300


def _applied(path: Path) -> Counter[int]:
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(json.loads(line)["i"] for line in lines if line)


@pytest.mark.parametrize("replayable", [True, False])
def test_a_killed_producer_is_replayed_or_its_run_is_not_a_success(
    replayable: bool, tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    out, marker = tmp_path / "sink.jsonl", tmp_path / "producer-killed"
    env = {
        "VF_TEST_OUT": str(out),
        "VF_TEST_FLOW": f"restarted-{int(replayable)}",
        "VF_TEST_COUNT": str(COUNT),
        "VF_TEST_CRASH_AT": str(CRASH_AT),
        "VF_TEST_MARKER": str(marker),
        "VF_TEST_REPLAYABLE": "1" if replayable else "0",
    }
    run = run_flow("restarted.py", nats=nats_server, redis=redis_server, env=env)
    applied = _applied(out)
    twice = sorted(i for i, n in applied.items() if n > 1)
    assert marker.exists(), "the producer never reached the item that kills it"
    assert sorted(applied) == list(range(1, COUNT + 1)), run.output[-4000:]
    if replayable:
        assert run.code == 0, run.output[-4000:]
        assert not twice, f"{len(twice)} applied twice, first {twice[:10]}"
        assert "VF_PRODUCER_NOT_REPLAYABLE" not in run.output
    else:
        assert run.code == 9, run.output[-4000:]
        assert "warning[VF_PRODUCER_NOT_REPLAYABLE] producer numbers restarted 1 time(s)" in (
            run.output
        )
        assert "restarted and re-emitted items (VF_PRODUCER_NOT_REPLAYABLE)" in run.output
        print(f"not replayable: {len(twice)} of {COUNT} items applied twice")
