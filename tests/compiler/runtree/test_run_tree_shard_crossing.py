"""Day two across the shard threshold (ADR 0225): a commit takes an environment from one
Application (Kustomization) to shards, or back, so every node's objects move from one
owner to another. The second sync must keep every object both commits hold (no running
Job killed and started again, no Deployment gone and back) and leave nothing without an
owner. The threshold is lowered for the sharded commit of a BATCH flow; real nats-server
and Redis-compatible store."""

from __future__ import annotations

from pathlib import Path

import pytest

import vf.emit.shards as shards_module
from tests.compiler.runtree.test_run_tree_lifecycle import (
    FLOWS,
    applied,
    cluster,  # noqa: F401  (the fixture)
    config,
    finish,
    report,
    results,
)
from vf.pipeline import CompileRequest, compile_project
from vf.runtree.cluster import Cluster
from vf.runtree.command import RunTreeRequest, prepare
from vf.runtree.manifests import TreeEnvironment
from vf.runtree.sync import sync
from vf.tree.write import write_tree

pytestmark = pytest.mark.slow  # compiles trees and runs real pods

COUNT = 12
GITOPS = (
    "gitops:\n  repo_url: https://git.example.com/a/b.git\n  path: deploy\n"
    "  argocd: {}\n  flux: {}\n"
)
Key = tuple[str, str, str]


def _commit(
    tmp: Path,
    name: str,
    monkeypatch: pytest.MonkeyPatch,
    *,
    sharded: bool,
    extra: bool = False,
    buckets: int = 16,
) -> Path:
    """The flow compiled as one commit: in shards (``buckets`` of them for the nodes), or as
    one overlay; ``extra``: with one more node, ``again``."""
    with monkeypatch.context() as patch:
        if sharded:
            patch.setattr(shards_module, "SHARD_OVER", 3)
            patch.setattr(shards_module, "SHARD_BUCKETS", buckets)
        shape = {"out": "/results/sink.jsonl", "count": str(COUNT), "tag": "x"}
        for key, value in {**shape, **({"extra": "1"} if extra else {})}.items():
            patch.setenv(f"VF_TEST_{key.upper()}", value)
        request = CompileRequest(
            graph=str(FLOWS / "batch.py"), config=str(config(tmp, extra=GITOPS))
        )
        result = compile_project(request)
    tree = tmp / name
    write_tree(tree, result.tree)
    assert (tree / "shards").is_dir() == sharded
    return tree


def _keys(rendered: TreeEnvironment) -> set[Key]:
    return {
        (o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in rendered.objects
    }


def _day_two(cluster: Cluster, first: Path, second: Path, *, mode: str) -> None:  # noqa: F811
    sink = results(cluster, "sink.jsonl")
    rendered = {}
    for name, tree in (("first", first), ("second", second)):
        request = RunTreeRequest(tree=tree, env="dev", app=FLOWS, sync=mode)
        rendered[name], resolver = prepare(request, log=print)
        if name == "second":
            kept = {k: c for k, c in cluster.controllers.items() if k in _keys(rendered[name])}
            assert kept  # the Jobs and Deployments both commits hold
        assert sync(cluster, rendered[name], resolver, mode=mode, app="crossing", timeout=60) == []
        finish(cluster)
    # every workload both commits hold is the one the first sync made: never deleted
    gone = sorted(k[2] for k, c in kept.items() if cluster.controllers.get(k) is not c)
    assert gone == [], f"deleted and created again: {gone}"
    assert report(f"crossed ({mode})", applied(sink), COUNT) == (COUNT, 0, 0)
    # nothing left over, and each object owned by whoever reads it now
    assert set(cluster.objects) == _keys(rendered["second"])
    if mode == "flux":
        held = {k for keys in cluster.inventory.values() for k in keys}
        assert held == set(cluster.objects)
        assert all(k in cluster.inventory[cluster.labelled[k]] for k in cluster.objects)
    else:
        apps = cluster.gitops.held(env="dev", kind="Application")
        assert len(set(cluster.owner.values())) == len(apps)


@pytest.mark.parametrize("mode", ["flux", "argocd"])
def test_growing_past_the_threshold_keeps_every_object(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    first = _commit(tmp_path, "c1", monkeypatch, sharded=False)
    second = _commit(tmp_path, "c2", monkeypatch, sharded=True)
    _day_two(cluster, first, second, mode=mode)


@pytest.mark.parametrize("mode", ["flux", "argocd"])
@pytest.mark.xfail(
    strict=True,
    reason="a shard's Kustomization (Application) is deleted with what it still owns (ADR 0238)",
)
def test_shrinking_below_the_threshold_keeps_every_object(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    first = _commit(tmp_path, "c1", monkeypatch, sharded=True)
    second = _commit(tmp_path, "c2", monkeypatch, sharded=False)
    _day_two(cluster, first, second, mode=mode)


@pytest.mark.parametrize(
    "mode",
    [
        "flux",
        pytest.param(
            "argocd",
            marks=pytest.mark.xfail(
                strict=True,
                reason="a shard's Application prunes the nodes that move to the shard it "
                "splits into before that one applies them (ADR 0249)",
            ),
        ),
    ],
)
def test_doubling_the_shard_count_keeps_every_object(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    """A shard past the limits doubles the bucket count (ADR 0249: the one move left), and
    each old shard splits in two. Flux: a shard waits for the shards it splits into
    (ADR 0225)."""
    first = _commit(tmp_path, "c1", monkeypatch, sharded=True, buckets=1)
    second = _commit(tmp_path, "c2", monkeypatch, sharded=True, buckets=2)
    counts = [len(list((tree / "shards" / "dev").iterdir())) for tree in (first, second)]
    assert counts[1] > counts[0]
    _day_two(cluster, first, second, mode=mode)


@pytest.mark.parametrize("mode", ["flux", "argocd"])
def test_a_node_removed_as_the_environment_grows_past_the_threshold(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    """The commit that shards the environment also drops the node ``again`` (a new run:
    every Job of the flow is renamed). Flux: the workers part collects what it held that
    no shard took, after every shard applied (ADR 0225): nothing of the first commit is
    left. Argo CD: the environment's Application prunes only what says ``Prune=true``
    (ADR 0238), so what the first commit had and the second has not stays, still its
    own, for a person to delete; nothing else is left."""
    first = _commit(tmp_path, "c1", monkeypatch, sharded=False, extra=True)
    second = _commit(tmp_path, "c2", monkeypatch, sharded=True)
    sink = results(cluster, "sink.jsonl")
    rendered = {}
    for name, tree in (("first", first), ("second", second)):
        request = RunTreeRequest(tree=tree, env="dev", app=FLOWS, sync=mode)
        rendered[name], resolver = prepare(request, log=print)
        assert sync(cluster, rendered[name], resolver, mode=mode, app="crossing", timeout=60) == []
        finish(cluster)
    # a changed graph is a new run: every item again, none lost
    assert report(f"removed as it grew ({mode})", applied(sink), COUNT)[::2] == (COUNT, 0)
    before, after = _keys(rendered["first"]), _keys(rendered["second"])
    removed = {k for k in before - after if "again" in k[2]}
    assert removed  # the node's Job and what it alone reads
    left = set(cluster.objects) - after
    if mode == "flux":
        assert left == set()
    else:
        assert removed <= left <= before
        assert {cluster.owner[k] for k in left} == {"crossing"}  # the environment's own
        assert after <= set(cluster.objects)
