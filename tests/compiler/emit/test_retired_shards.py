"""An environment that goes back below the shard threshold keeps its shards' controller
objects, retired (ADR 0256): each reads an empty folder, Flux's after the part that now
holds its nodes, Argo CD's without pruning. The committed tree is read for them, so a
compile into a tree it wrote changes nothing, and growing again makes them live."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

import vf.emit.shards as shards_module
from tests.support import example_graph
from vf.cli import cli
from vf.pipeline import CompileRequest, compile_project
from vf.tree.write import write_tree

Obj = dict[str, Any]
GRAPH = example_graph("realtime_cameras")  # gitops.path deploy/cameras, ScaledObjects
RETIRED = "deploy/cameras/shards/dev/retired"


def _tree(tmp: Path, name: str, *, sharded: bool, over: Path | None = None) -> dict[str, str]:
    """The example compiled over the committed tree ``over``, written to ``tmp/name``."""
    with pytest.MonkeyPatch.context() as patch:
        if sharded:
            patch.setattr(shards_module, "SHARD_OVER", 5)
        tree = compile_project(CompileRequest(graph=GRAPH, chart_from=over)).tree
    write_tree(tmp / name, tree)
    return tree


def _load(tree: dict[str, str], path: str) -> Obj:
    loaded = YAML(typ="safe").load(tree[path])
    assert isinstance(loaded, dict)
    return loaded


def _shard_files(tree: dict[str, str], env: str = "dev") -> list[str]:
    return sorted(p for p in tree if p.startswith("gitops/") and f"-{env}-shard-" in p)


def test_a_shrunk_environment_keeps_its_shards_retired(tmp_path: Path) -> None:
    sharded = _tree(tmp_path, "c1", sharded=True)
    shrunk = _tree(tmp_path, "c2", sharded=False, over=tmp_path / "c1")
    assert _shard_files(shrunk) == _shard_files(sharded) != []
    # one folder, no manifest in it: both controllers read it as no object at all
    assert [p for p in shrunk if p.startswith("shards/")] == [
        "shards/dev/retired/README.md",
        "shards/prod/retired/README.md",
    ]
    workers = _load(shrunk, "gitops/flux/kustomization-dev.yaml")
    assert workers["spec"]["path"] == "./deploy/cameras/overlays/dev"
    assert [d["name"] for d in workers["spec"]["dependsOn"]] == [
        "cameras-dev-gitops",
        "cameras-dev-infra",
    ]
    root = _load(shrunk, "gitops/argocd/root-dev.yaml")
    twins = 0
    for path in _shard_files(shrunk):
        obj = _load(shrunk, path)
        spec, name = obj["spec"], obj["metadata"]["name"]
        assert name == _load(sharded, path)["metadata"]["name"]  # the same object
        assert obj["metadata"]["annotations"]["vf.dev/shard-holds"].startswith("nothing: retired")
        if obj["kind"] == "Kustomization":
            twin = name.endswith("-optional")
            twins += twin
            heir = "cameras-dev-optional" if twin else "cameras-dev"
            assert spec["path"] == f"./{RETIRED}" and spec["prune"] is True
            assert spec["wait"] is False and "healthChecks" not in spec and "patches" not in spec
            assert spec["dependsOn"] == [{"name": "cameras-dev-gitops"}, {"name": heir}]
        else:
            assert spec["source"]["path"] == RETIRED
            assert spec["source"]["directory"] == {"recurse": False}
            assert spec["syncPolicy"]["syncOptions"][-1] == "Prune=false"
            assert spec["syncPolicy"]["automated"] == {"prune": True, "selfHeal": True}
            assert "ignoreDifferences" not in spec
            assert obj["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"] == "1"
            assert path.rpartition("/")[2] in root["spec"]["source"]["directory"]["include"]
    assert twins  # the ScaledObjects' Kustomizations wait for the optional part
    env_app = _load(shrunk, "gitops/argocd/application-dev.yaml")
    assert "Prune=false" not in env_app["spec"]["syncPolicy"]["syncOptions"]
    readme = shrunk["README.md"]
    assert "`dev` was delivered in shards and is now below" in readme
    assert "`shards/<env>/retired/`" in readme


def test_compiling_a_shrunk_tree_again_writes_the_same_tree(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    runner = CliRunner()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shards_module, "SHARD_OVER", 5)
        assert runner.invoke(cli, ["compile", GRAPH, "--out", str(out)]).exit_code == 0
    assert (out / "shards" / "dev" / "00").is_dir()
    shrink = runner.invoke(cli, ["compile", GRAPH, "--out", str(out)])
    assert shrink.exit_code == 0, shrink.output
    assert (out / "gitops" / "argocd" / "application-dev-shard-09.yaml").is_file()
    check = runner.invoke(cli, ["compile", GRAPH, "--out", str(out), "--check"])
    assert check.exit_code == 0, check.output
    first = compile_project(CompileRequest(graph=GRAPH, chart_from=out)).tree
    assert compile_project(CompileRequest(graph=GRAPH, chart_from=out)).tree == first


def test_growing_again_makes_each_retired_shard_live(tmp_path: Path) -> None:
    sharded = _tree(tmp_path, "c1", sharded=True)
    _tree(tmp_path, "c2", sharded=False, over=tmp_path / "c1")
    again = _tree(tmp_path, "c3", sharded=True, over=tmp_path / "c2")
    gitops = [p for p in sharded if p.startswith(("gitops/", "shards/"))]
    assert [p for p in again if p.startswith(("gitops/", "shards/"))] == gitops
    assert all(again[p] == sharded[p] for p in gitops)


def test_a_tree_never_sharded_retires_nothing(tmp_path: Path) -> None:
    fresh = _tree(tmp_path, "c1", sharded=False)
    assert _tree(tmp_path, "c2", sharded=False, over=tmp_path / "c1") == fresh
    assert not any(p.startswith("shards/") for p in fresh)
