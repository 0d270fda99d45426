"""``vf run-local`` runs nodes as local processes: it needs no container image."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.runtime.support import FLOWS, run_flow
from vf_runtime.local.infra import LocalServer

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it


def test_run_local_starts_without_any_image(
    tmp_path: Path, nats_server: LocalServer, redis_server: LocalServer
) -> None:
    shutil.copy(FLOWS / "linear.py", tmp_path / "linear.py")
    shutil.copy(FLOWS / "testnodes.py", tmp_path / "testnodes.py")
    (tmp_path / "vf.yaml").write_text("environments:\n  local: {}\n", encoding="utf-8")
    out = tmp_path / "sink.jsonl"
    env = {"VF_TEST_OUT": str(out), "VF_TEST_FLOW": "no-images", "VF_TEST_COUNT": "5"}
    run = run_flow(str(tmp_path / "linear.py"), nats=nats_server, redis=redis_server, env=env)
    assert run.code == 0, run.output[-3000:]
    assert "VF_CONFIG_NO_IMAGE" not in run.output
    assert sorted(json.loads(line)["i"] for line in out.read_text().splitlines()) == [1, 2, 3, 4, 5]
