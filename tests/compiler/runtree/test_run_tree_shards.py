"""``vf run-tree --sync argocd|flux`` delivers a flow in shards (ADR 220) exactly once: the
root applies an Application (a Kustomization) per shard, each applies its own folder, and
every item reaches the sink once. The threshold is lowered so that a three-node BATCH
flow shards; real nats-server and Redis-compatible store."""

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
from vf.runtree.sync import sync
from vf.runtree.teardown import delete_flow
from vf.tree.write import write_tree

COUNT = 12
GITOPS = (
    "gitops:\n  repo_url: https://git.example.com/a/b.git\n  path: deploy\n"
    "  argocd: {}\n  flux: {}\n"
)


def _sharded_tree(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(shards_module, "SHARD_OVER", 3)
    for name, value in {"out": "/results/sink.jsonl", "count": str(COUNT), "tag": "s"}.items():
        monkeypatch.setenv(f"VF_TEST_{name.upper()}", value)
    request = CompileRequest(graph=str(FLOWS / "batch.py"), config=str(config(tmp, extra=GITOPS)))
    result = compile_project(request)
    tree = tmp / "tree"
    write_tree(tree, result.tree)
    return tree


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["argocd", "flux"])
def test_a_sharded_flow_is_delivered_exactly_once(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    tree = _sharded_tree(tmp_path, monkeypatch)
    numbers = sorted(p.name for p in (tree / "shards" / "dev").iterdir())
    assert len(numbers) >= 3, numbers  # the shared part and at least two of nodes
    sink = results(cluster, "sink.jsonl")
    request = RunTreeRequest(tree=tree, env="dev", app=FLOWS, sync=mode)
    rendered, resolver = prepare(request, log=print)
    assert sync(cluster, rendered, resolver, mode=mode, app="sharded", timeout=60) == []
    finish(cluster)
    assert report(f"sharded ({mode})", applied(sink), COUNT) == (COUNT, 0, 0)
    assert cluster.recreated == []  # no Job deleted and created again
    assert {k for k in cluster.objects} == {
        (o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in rendered.objects
    }
    held = {
        "argocd": cluster.gitops.held(env="dev", kind="Application"),
        "flux": cluster.gitops.held(env="dev", kind="Kustomization"),
    }[mode]
    shard_names = sorted(o["metadata"]["name"] for o in held if "-shard-" in o["metadata"]["name"])
    assert shard_names == [f"tree-batch-dev-shard-{n}" for n in numbers if n != "00"]
    if mode == "argocd":  # each shard's objects are its Application's own
        owners = set(cluster.owner.values())
        assert owners == {"sharded", *(f"sharded#shard-{n}" for n in numbers if n != "00")}
    else:  # each shard's Kustomization holds its folder's objects, and only those
        for name in shard_names:
            folder = tree / "shards" / "dev" / name.rpartition("-")[2]
            files = {p.stem for p in folder.iterdir()}
            held_files = {f"{k[0].lower()}-{k[2]}" for k in cluster.inventory[name]}
            assert held_files == files, name
    # a second sync of the same commit changes nothing and runs nothing again
    assert sync(cluster, rendered, resolver, mode=mode, app="sharded", timeout=60) == []
    finish(cluster)
    assert report(f"resynced ({mode})", applied(sink), COUNT) == (COUNT, 0, 0)
    delete_flow(cluster, env="dev", mode=mode, app="sharded")
    assert not [k for k in cluster.objects if k[0] not in ("Namespace",)]
