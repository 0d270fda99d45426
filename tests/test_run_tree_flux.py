"""``vf run-tree --sync flux`` does what Flux's controllers do with the tree's own
``gitops/flux`` objects (ADR 150): source-controller builds the HelmRelease's chart from
its ``valuesFiles``, helm-controller waits for the release and remediates a failure as the
release says, and kustomize-controller judges a Job by the reader it puts first. Real
nats-server and Redis-compatible store, started from the tree's own manifests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_run_tree_lifecycle import (
    applied,
    cluster,  # noqa: F401  (the fixture)
    compile_tree,
    config,
    finish,
    report,
    results,
)
from vf.runtree.cluster import Cluster
from vf.runtree.command import RunTreeRequest, prepare
from vf.runtree.flux_sync import job_reader
from vf.runtree.manifests import render
from vf.runtree.sync import sync

FLOWS = Path(__file__).resolve().parent / "runtree_flows"
COUNT = 20
GITOPS = "gitops:\n  repo_url: https://git.example.com/a/b.git\n  path: deploy\n  flux: {flux}\n"


def _tree(tmp_path: Path, *, flux: str, interval: str = "0") -> Path:
    settings = config(tmp_path, extra=GITOPS.format(flux=flux))
    return compile_tree(
        "batch.py",
        tmp_path / "tree",
        config=settings,
        out="/results/sink.jsonl",
        count=str(COUNT),
        interval=interval,
        tag="a",
    )


def _kinds_and_names(objects: tuple[dict[str, object], ...]) -> set[tuple[object, object]]:
    return {(o["kind"], o["metadata"]["name"]) for o in objects}  # type: ignore[index]


@pytest.mark.usefixtures("cluster")
def test_flux_builds_the_release_chart_from_its_values_files(tmp_path: Path) -> None:
    """values.yaml is replaced by the merge of valuesFiles: without values.yaml first in
    the list the chart's rows are gone and the template fails (index of nil pointer)."""
    tree = _tree(tmp_path, flux="{helm_release: true}")
    as_flux = render(tree, env="dev", renderer="helm", sync="flux")
    as_helm = render(tree, env="dev", renderer="helm")
    print(f"Flux's chart renders {len(as_flux.objects)} objects")
    assert _kinds_and_names(as_flux.objects) == _kinds_and_names(as_helm.objects)
    assert any(o["kind"] == "Job" for o in as_flux.objects)


def _sync(into: Cluster, tree: Path, *, renderer: str, timeout: float) -> list[str]:
    request = RunTreeRequest(tree=tree, env="dev", renderer=renderer, app=FLOWS, sync="flux")
    rendered, resolver = prepare(request, log=print)
    return sync(into, rendered, resolver, mode="flux", app="batch", timeout=timeout)


@pytest.mark.slow
@pytest.mark.parametrize("renderer", ["helm", "kustomize"])
def test_a_batch_longer_than_flux_waits_is_ready_and_runs_once(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    renderer: str,
) -> None:
    """The batch runs longer than Flux waits (the sync's timeout stands in for the
    release's and the Kustomization's): the release never waits for its Jobs, so its
    install neither fails nor is uninstalled; the workers' Kustomization waits on no Job,
    so it is Ready while the batch runs."""
    sink = results(cluster, "sink.jsonl")
    flux = "{helm_release: true}" if renderer == "helm" else "{}"
    tree = _tree(tmp_path, flux=flux, interval="1")
    errors = _sync(cluster, tree, renderer=renderer, timeout=12)
    print(f"flux ({renderer}) sync: {errors or 'Ready'}")
    assert errors == []
    finish(cluster)
    assert report(f"flux ({renderer})", applied(sink), COUNT) == (COUNT, 0, 0)


def test_flux_puts_its_own_job_reader_first_unless_it_impersonates() -> None:
    expressions = {"healthCheckExprs": [{"apiVersion": "batch/v1", "kind": "Job"}]}
    assert job_reader(expressions) == "complete"
    assert job_reader({**expressions, "serviceAccountName": "flux-a"}) == "expression"
    assert job_reader({**expressions, "kubeConfig": {"secretRef": {"name": "k"}}}) == "expression"
    assert job_reader({"serviceAccountName": "flux-a"}) == "complete"
