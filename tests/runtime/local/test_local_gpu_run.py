"""GPU grants reach the workers of ``vf run-local`` (fake nvidia-smi: no GPU machine here;
real nats-server and redis-server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import gpu_fakes
from tests.runtime.support import run_flow
from vf_runtime.local.infra import LocalServer

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

TWO_CARDS = gpu_fakes.host([gpu_fakes.card_row(0), gpu_fakes.card_row(1)])


def test_each_gpu_replica_gets_its_grant_by_uuid(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    out = tmp_path / "sink.jsonl"
    env = {
        **gpu_fakes.install(tmp_path, TWO_CARDS),
        "VF_TEST_OUT": str(out),
        "VF_TEST_FLOW": "gpu-grants",
    }
    run = run_flow("gpu.py", nats=nats_server, redis=redis_server, env=env)
    assert run.code == 0, run.output[-4000:]
    assert "replicas share devices here" in run.output
    seen = {}
    for line in out.read_text().splitlines():
        item = json.loads(line)
        seen[item["replica"]] = (item["devices"], item["count"], item["grant"])
    expected = {0: gpu_fakes.uuid(0), 1: gpu_fakes.uuid(1), 2: gpu_fakes.uuid(0)}
    for replica, (devices, count, grant) in seen.items():
        assert devices == expected[replica]
        assert count == "1"
        assert grant["devices"] == [expected[replica]]
        assert grant["policy"] == "shared" and grant["host"] == "observed"
        assert grant["exclusive"] is (replica == 1)
