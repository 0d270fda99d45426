"""A replica change scales a worker in place where the topology allows, restarts exactly the
pods whose configuration counts it, and ``vf diff`` says which is which."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.compiler.emit.helm.test_helm_replicas import CONFIG, JOIN
from vf.commands.diff.command import diff_project
from vf.commands.diff.report import render_text
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.tree.write import write_tree

Obj = dict[str, Any]


def _compile(folder: Path, *, replicas: int) -> CompileResult:
    folder.mkdir(exist_ok=True)
    (folder / "graph.py").write_text(JOIN, encoding="utf-8")
    (folder / "vf.yaml").write_text(CONFIG.format(a=replicas), encoding="utf-8")
    return compile_project(CompileRequest(graph=str(folder / "graph.py")))


def _workloads(result: CompileResult) -> dict[str, Obj]:
    return {
        o["metadata"]["labels"]["vf.dev/node"]: o
        for o in result.objects["dev"]
        if o["kind"] == "Deployment" and "vf.dev/node" in o["metadata"].get("labels", {})
    }


def test_an_unpartitioned_realtime_worker_scales_without_restarting(tmp_path: Path) -> None:
    before = _workloads(_compile(tmp_path / "one", replicas=1))
    after = _workloads(_compile(tmp_path / "three", replicas=3))
    assert (before["a"]["spec"]["replicas"], after["a"]["spec"]["replicas"]) == (1, 3)
    assert before["a"]["spec"]["template"] == after["a"]["spec"]["template"]
    # the join counts a's end-of-stream markers per replica: its pods restart
    assert before["join"]["spec"]["template"] != after["join"]["spec"]["template"]
    for node in ("b", "sink"):
        assert before[node] == after[node], node


def test_vf_diff_says_which_replica_changes_restart_pods(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_tree(Path("deploy"), _compile(tmp_path / "flow", replicas=1).tree)
    report = render_text(diff_project(_compile(tmp_path / "flow", replicas=3), out=Path("deploy")))
    assert "replicas 1 → 3: scales in place, its pods keep running" in report
    counted = "restarts its pods: it counts its parents' replicas"
    assert f"{counted} (VF_PARENT_REPLICAS a=1,b=1 → a=3,b=1)" in report
