"""``vf run-tree --without-crd KIND`` runs a tree on a cluster that serves no such kind
(ADR 0202). A flow with ``metrics.service_monitor: true`` on a cluster without the
Prometheus Operator syncs and runs under Argo CD, Flux and Helm: each refuses only the
ServiceMonitor (Argo CD in its last wave, Flux in the Kustomization nothing depends on,
the chart never renders it). Before, Argo CD's dry-run failed the whole sync, and Flux's
infrastructure Kustomization failed, so no worker started. Real nats-server and store."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compiler.runtree.test_run_tree_lifecycle import (
    FLOWS,
    applied,
    cluster,  # noqa: F401  (the fixture's set-up: PATH)
    compile_tree,
    config,
    finish,
    report,
    results,
)
from vf.runtree.cluster import Cluster
from vf.runtree.command import RunTreeRequest, prepare
from vf.runtree.podhost import ClusterOptions
from vf.runtree.sync import sync

COUNT = 10
ABSENT = frozenset({"ServiceMonitor"})
EXTRA = (
    "    pods: {metrics: {service_monitor: true}}\n"
    "gitops:\n  repo_url: https://git.example.com/a/b.git\n  path: deploy\n"
    "  argocd: {}\n  flux: {}\n"
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "renderer"), [("argocd", "kustomize"), ("flux", "kustomize"), ("helm", "helm")]
)
def test_a_flow_with_a_service_monitor_runs_on_a_cluster_without_its_crd(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    mode: str,
    renderer: str,
) -> None:
    tree = compile_tree(
        "batch.py",
        tmp_path / "tree",
        config=config(tmp_path, extra=EXTRA),
        out="/results/sink.jsonl",
        count=str(COUNT),
        tag="a",
    )
    bare = Cluster(ClusterOptions(**{**vars(cluster.options), "absent_kinds": ABSENT}))
    try:
        request = RunTreeRequest(
            tree=tree, env="dev", renderer=renderer, app=FLOWS, sync=mode, absent_kinds=ABSENT
        )
        rendered, resolver = prepare(request, log=print)
        errors = sync(bare, rendered, resolver, mode=mode, app="batch", timeout=60)
        print(f"{mode} ({renderer}) without the ServiceMonitor CRD: {errors or 'synced'}")
        print(f"  refused: {bare.refused}")
        assert errors == []
        assert not any(k[0] == "ServiceMonitor" for k in bare.objects)
        assert any(k[0] == "Service" and k[2].endswith("-metrics") for k in bare.objects)
        finish(bare)
        sink = results(bare, "sink.jsonl")
        assert report(f"{mode} ({renderer})", applied(sink), COUNT) == (COUNT, 0, 0)
    finally:
        bare.shutdown(timeout=20)
    assert bare.idle()
