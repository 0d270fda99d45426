"""An environment that goes back below the shard threshold, or whose shard count changes,
keeps its old shards' controller objects, retired (ADRs 0256, 0258): each reads an empty
folder, Flux's after the parts that now hold its nodes, Argo CD's without pruning. The
committed tree is read for them, so a compile into a tree it wrote changes nothing, and
growing again makes them live."""

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


def _tree(
    tmp: Path, name: str, *, sharded: bool, over: Path | None = None, limit: int | None = None
) -> dict[str, str]:
    """The example compiled over the committed tree ``over``, written to ``tmp/name``;
    ``limit``: the objects a shard may hold, its nodes in one bucket first."""
    with pytest.MonkeyPatch.context() as patch:
        if sharded:
            patch.setattr(shards_module, "SHARD_OVER", 5)
        if limit is not None:
            patch.setattr(shards_module, "SHARD_BUCKETS", 1)
            patch.setattr(shards_module, "SHARD_MAX_OBJECTS", limit)
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


def _numbers(tree: dict[str, str], folder: str) -> set[str]:
    found = (p.split("-shard-")[1] for p in _shard_files(tree) if p.startswith(folder))
    return {n.split("-")[0].split(".")[0] for n in found}


def test_a_doubled_shard_count_retires_the_old_shards(tmp_path: Path) -> None:
    """Past the limits every shard is numbered anew; the old numbers' Applications and
    Kustomizations stay, retired, and a compile into that tree writes it again."""
    before = _tree(tmp_path, "c1", sharded=True, limit=10_000)
    held = len([p for p in before if p.startswith("shards/dev/01/")])
    doubled = _tree(tmp_path, "c2", sharded=True, over=tmp_path / "c1", limit=held - 1)
    old = _numbers(before, "gitops/argocd")
    assert old == {"01"}
    live = {p.split("/")[2] for p in doubled if p.startswith("shards/dev/")} - {"00", "retired"}
    assert live and not live & old and min(int(n) for n in live) > 2
    for folder in ("gitops/argocd", "gitops/flux"):
        assert _numbers(doubled, folder) == old | live
    for number in old:
        app = _load(doubled, f"gitops/argocd/application-dev-shard-{number}.yaml")
        assert app["spec"]["source"]["path"] == RETIRED
        assert app["spec"]["syncPolicy"]["syncOptions"].count("Prune=false") == 1
        assert "the live shards" in app["metadata"]["annotations"]["vf.dev/shard-holds"]
        part = _load(doubled, f"gitops/flux/kustomization-dev-shard-{number}.yaml")
        assert part["spec"]["dependsOn"] == [
            {"name": "cameras-dev-gitops"},
            {"name": "cameras-dev"},
        ]
        twin = f"gitops/flux/kustomization-dev-shard-{number}-optional.yaml"
        if twin in doubled:  # waits for every live shard's optional objects as well
            waits = [d["name"] for d in _load(doubled, twin)["spec"]["dependsOn"]]
            assert waits[0] == "cameras-dev-gitops"
            assert waits[1] in ("cameras-dev-optional", "cameras-dev")  # the optional part's
            assert waits[2:] and all(w.endswith("-optional") for w in waits[2:])
    assert "numbered anew" in doubled["shards/dev/retired/README.md"]
    again = _tree(tmp_path, "c3", sharded=True, over=tmp_path / "c2", limit=held - 1)
    assert again == doubled
