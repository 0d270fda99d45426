"""Where ``vf run-local``'s workers find their pod's mounts: a claim is the run directory's
folder for it (``vf run-tree``'s too), a host path is this machine's own; the container
paths are rewritten in the worker's environment, its node parameters among them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import REPO
from vf.commands.run_local.mounts import claims, local_paths, mounted_env
from vf.pipeline import CompileRequest, compile_project

FLOWS = REPO / "tests" / "runtree_flows"


def test_claims_are_run_directory_folders_and_host_paths_this_machines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "vf.yaml"
    config.write_text(
        "environments:\n  dev:\n    namespace: lifecycle\n"
        "    images: {default: registry.example.com/vf/tree-tests:1}\n"
        "    broker: {profile: dev}\n    payload_store: {profile: dev}\n"
        "    mounts: {sink: ['results:/results', '/srv/frames:/in:ro']}\n"
    )
    monkeypatch.setenv("VF_TEST_OUT", "/results/out/sink.jsonl")
    result = compile_project(CompileRequest(graph=str(FLOWS / "batch.py"), config=str(config)))
    plan = result.plans[0]
    sink = next(w for w in plan.workloads if w.node == "sink")
    run_dir = tmp_path / "rd"
    paths = local_paths(sink, run_dir=run_dir, namespace=plan.namespace)
    folder = run_dir / "claims" / "lifecycle" / "results"
    assert paths == {"/results": folder, "/in": Path("/srv/frames")}
    assert folder.is_dir()
    env = mounted_env(dict(sink.env), paths)
    assert json.loads(env["VF_NODE_PARAMS_JSON"])["path"] == f"{folder}/out/sink.jsonl"
    assert claims(plan, run_dir) == [("sink", "/results", folder)]
    double = next(w for w in plan.workloads if w.node == "double")
    assert local_paths(double, run_dir=run_dir, namespace=plan.namespace) == {}
