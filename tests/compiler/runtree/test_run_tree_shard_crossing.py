"""Day two across the shard threshold (ADR 0225): a commit takes an environment from one
Application (Kustomization) to shards, or back, so every node's objects move from one
owner to another. The second sync must keep every object both commits hold (no running
Job killed and started again, no Deployment gone and back) and leave nothing without an
owner. The threshold is lowered for the sharded commit of a BATCH flow; each commit is
compiled over the one before it, as into a committed tree (going back below the
threshold retires the shards, ADR 0256); real nats-server and Redis-compatible store."""

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
from vf.runtree.teardown import delete_flow
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
    limit: int = shards_module.SHARD_MAX_OBJECTS,
    over: Path | None = None,
) -> Path:
    """The flow compiled as one commit: in shards (``buckets`` of them for the nodes, more
    where one would hold over ``limit`` objects), or as one overlay; ``extra``: with one
    more node, ``again``; ``over``: the committed tree this commit is compiled into."""
    with monkeypatch.context() as patch:
        if sharded:
            patch.setattr(shards_module, "SHARD_OVER", 3)
            patch.setattr(shards_module, "SHARD_BUCKETS", buckets)
            patch.setattr(shards_module, "SHARD_MAX_OBJECTS", limit)
        shape = {"out": "/results/sink.jsonl", "count": str(COUNT), "tag": "x"}
        for key, value in {**shape, **({"extra": "1"} if extra else {})}.items():
            patch.setenv(f"VF_TEST_{key.upper()}", value)
        request = CompileRequest(
            graph=str(FLOWS / "batch.py"), config=str(config(tmp, extra=GITOPS)), chart_from=over
        )
        result = compile_project(request)
    tree = tmp / name
    write_tree(tree, result.tree)
    assert any((tree / "shards").glob("dev/[0-9]*")) == sharded
    return tree


def _keys(rendered: TreeEnvironment) -> set[Key]:
    return {
        (o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in rendered.objects
    }


def _retired(obj: dict[str, object]) -> bool:
    spec = obj["spec"]
    assert isinstance(spec, dict)
    path = str((spec.get("source") or {}).get("path", "")) or str(spec.get("path", ""))
    return path.endswith("/retired")


def _sync_each(cluster: Cluster, trees: tuple[Path, ...], *, mode: str) -> list[TreeEnvironment]:  # noqa: F811
    """Sync each commit in turn; return each one's render."""
    rendered = []
    for tree in trees:
        request = RunTreeRequest(tree=tree, env="dev", app=FLOWS, sync=mode)
        made, resolver = prepare(request, log=print)
        rendered.append(made)
        assert sync(cluster, made, resolver, mode=mode, app="crossing", timeout=60) == []
        finish(cluster)
    return rendered


def _day_two(cluster: Cluster, *trees: Path, mode: str) -> None:  # noqa: F811
    sink = results(cluster, "sink.jsonl")
    rendered = _sync_each(cluster, trees[:1], mode=mode)
    kept = dict(cluster.controllers)
    rendered += _sync_each(cluster, trees[1:], mode=mode)
    later = [_keys(r) for r in rendered[1:]]
    kept = {k: c for k, c in kept.items() if all(k in keys for keys in later)}
    assert kept  # the Jobs and Deployments every commit holds
    # every workload every commit holds is the one the first sync made: never deleted
    gone = sorted(k[2] for k, c in kept.items() if cluster.controllers.get(k) is not c)
    assert gone == [], f"deleted and created again: {gone}"
    assert report(f"crossed ({mode})", applied(sink), COUNT) == (COUNT, 0, 0)
    # nothing left over, and each object owned by whoever reads it now
    assert set(cluster.objects) == _keys(rendered[-1])
    if mode == "flux":
        held = {k for keys in cluster.inventory.values() for k in keys}
        assert held == set(cluster.objects)
        assert all(k in cluster.inventory[cluster.labelled[k]] for k in cluster.objects)
    else:  # each live Application owns what it reads; a retired one owns nothing
        apps = cluster.gitops.held(env="dev", kind="Application")
        assert len(set(cluster.owner.values())) == len([a for a in apps if not _retired(a)])


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
def test_shrinking_below_the_threshold_keeps_every_object(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    """The shards' Kustomizations (Applications) stay, retired (ADR 0256): Flux's wait for
    the workers part and then collect nothing it took; Argo CD's prune nothing."""
    first = _commit(tmp_path, "c1", monkeypatch, sharded=True)
    second = _commit(tmp_path, "c2", monkeypatch, sharded=False, over=first)
    assert (second / "shards" / "dev" / "retired" / "README.md").is_file()
    _day_two(cluster, first, second, mode=mode)
    kind = "Application" if mode == "argocd" else "Kustomization"
    retired = [o for o in cluster.gitops.held(env="dev", kind=kind) if _retired(o)]
    assert retired and all("-shard-" in o["metadata"]["name"] for o in retired)
    # deleting the root still deletes the whole flow: a retired shard owns nothing
    delete_flow(cluster, env="dev", mode=mode, app="crossing")
    assert [k for k in cluster.objects if k[0] != "Namespace"] == []


@pytest.mark.parametrize("mode", ["flux", "argocd"])
def test_growing_again_after_shrinking_keeps_every_object(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    """Past the threshold again, each retired shard is a live shard of the same name."""
    first = _commit(tmp_path, "c1", monkeypatch, sharded=True)
    second = _commit(tmp_path, "c2", monkeypatch, sharded=False, over=first)
    third = _commit(tmp_path, "c3", monkeypatch, sharded=True, over=second)
    folder = f"gitops/{'argocd' if mode == 'argocd' else 'flux'}"
    names = [{p.name for p in (t / folder).glob("*-shard-*")} for t in (first, second, third)]
    assert names[0] and names[0] == names[1] == names[2]
    assert not (third / "shards" / "dev" / "retired").exists()
    _day_two(cluster, first, second, third, mode=mode)


@pytest.mark.parametrize("mode", ["flux", "argocd"])
def test_doubling_the_shard_count_keeps_every_object(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    """A shard past the limits doubles the bucket count (ADR 0249: the one move left): the
    shards are numbered anew and the old ones retired (ADR 0258). Flux: a retired shard
    waits for the workers part, which waits for every live shard; Argo CD: a retired
    shard's Application prunes nothing, and no live one loses a node."""
    first = _commit(tmp_path, "c1", monkeypatch, sharded=True, buckets=1)
    held = len(list((first / "shards" / "dev" / "01").iterdir()))
    second = _commit(
        tmp_path, "c2", monkeypatch, sharded=True, buckets=1, limit=held - 1, over=first
    )
    numbers = [{p.name for p in (tree / "shards" / "dev").iterdir()} for tree in (first, second)]
    assert numbers[0] == {"00", "01"}
    assert {"00", "retired"} < numbers[1] and "01" not in numbers[1]
    _day_two(cluster, first, second, mode=mode)
    kind = "Application" if mode == "argocd" else "Kustomization"
    retired = [o["metadata"]["name"] for o in cluster.gitops.held(env="dev", kind=kind)]
    assert [n for n in retired if n.endswith("-shard-01")]


@pytest.mark.parametrize("mode", ["flux", "argocd"])
def test_halving_and_doubling_again_keeps_every_object(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    """Back to the base count, then past the limits again (ADR 0258): each change of the
    count retires the shards of the other, and a number delivered again is live again."""
    base = _commit(tmp_path, "c0", monkeypatch, sharded=True, buckets=1)
    limit = len(list((base / "shards" / "dev" / "01").iterdir())) - 1
    first = _commit(tmp_path, "c1", monkeypatch, sharded=True, buckets=1, limit=limit)
    second = _commit(tmp_path, "c2", monkeypatch, sharded=True, buckets=1, over=first)
    third = _commit(tmp_path, "c3", monkeypatch, sharded=True, buckets=1, limit=limit, over=second)
    live = [
        {p.name for p in (t / "shards" / "dev").iterdir()} - {"00", "retired"}
        for t in (first, second, third)
    ]
    assert live[1] == {"01"} and live[0] == live[2] and not live[0] & live[1]
    _day_two(cluster, first, second, third, mode=mode)


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


@pytest.mark.parametrize("mode", ["flux", "argocd"])
def test_a_node_removed_as_the_environment_shrinks(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    """The commit that goes back below the threshold also drops the node ``again``. Flux:
    a retired shard, once the workers part is Ready, collects what still carries its own
    labels: the dropped node's objects, and nothing the workers part took. Argo CD: a
    retired shard's Application says ``Prune=false``, so what the dropped node left stays,
    its own (and its automated sync is never started: it would wipe out every resource it
    has); the environment's Application owns everything else. Deleting the root deletes
    it all."""
    first = _commit(tmp_path, "c1", monkeypatch, sharded=True, extra=True)
    second = _commit(tmp_path, "c2", monkeypatch, sharded=False, over=first)
    sink = results(cluster, "sink.jsonl")
    rendered = _sync_each(cluster, (first, second), mode=mode)
    assert report(f"removed as it shrank ({mode})", applied(sink), COUNT)[::2] == (COUNT, 0)
    before, after = _keys(rendered[0]), _keys(rendered[1])
    removed = {k for k in before - after if "again" in k[2]}
    assert removed  # the node's Job and what it alone reads
    left = set(cluster.objects) - after
    assert after <= set(cluster.objects)
    if mode == "flux":
        assert left == set()
    else:
        assert removed <= left <= before
        owners = {cluster.owner[k] for k in left}
        assert owners and all(o.startswith("crossing#shard-") for o in owners)
        assert {cluster.owner[k] for k in after} == {"crossing"}
    delete_flow(cluster, env="dev", mode=mode, app="crossing")
    assert [k for k in cluster.objects if k[0] != "Namespace"] == []
