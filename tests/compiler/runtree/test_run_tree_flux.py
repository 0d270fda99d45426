"""``vf run-tree --sync flux`` does what Flux's controllers do with the tree's own
``gitops/flux`` objects (ADR 150, 188): source-controller builds the HelmRelease's chart,
helm-controller gives it the release's values from ``valuesFrom``, upgrades only when the
chart's version or those values change, waits for the release and remediates a failure as
the release says, and kustomize-controller judges a Job by the reader it puts first. Real
nats-server and Redis-compatible store, started from the tree's own manifests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.compiler.runtree.test_run_tree_lifecycle import (
    applied,
    cluster,  # noqa: F401  (the fixture)
    compile_tree,
    config,
    finish,
    report,
    results,
)
from tests.support import REPO
from vf.pipeline import CompileRequest, compile_project
from vf.runtree.cluster import Cluster
from vf.runtree.command import RunTreeRequest, prepare
from vf.runtree.flux_chart import ReleaseInputs, helm_release, release_inputs, upgrade_reason
from vf.runtree.flux_sync import job_reader
from vf.runtree.manifests import render
from vf.runtree.sync import sync
from vf.tree.write import write_tree

FLOWS = REPO / "tests" / "runtree_flows"
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


def _example_inputs(tmp_path: Path) -> tuple[Path, list[dict[str, ReleaseInputs]]]:
    """The batch example delivered as HelmReleases, compiled over its own tree before and
    after dev's `double` goes 1 -> 2 (prod runs 3): what helm-controller compares for each
    environment's release after each compile."""
    source = tmp_path / "src"
    shutil.copytree(REPO / "examples" / "batch_pipeline", source)
    config = source / "vf.yaml"
    text = config.read_text(encoding="utf-8").replace(
        "  flux:\n", "  flux:\n    helm_release: true\n"
    )
    out = tmp_path / "deploy"
    seen = []
    for edit in (text, text.replace("      double: 1\n", "      double: 2\n", 1)):
        config.write_text(edit, encoding="utf-8")
        request = CompileRequest(graph=str(source / "graph.py"), out=out, warn=lambda _: None)
        write_tree(out, compile_project(request).tree)
        releases = {env: helm_release(out, env=env) for env in ("dev", "prod")}
        seen.append({env: release_inputs(out, release=r) for env, r in releases.items() if r})
    return out, seen


def test_a_dev_change_upgrades_devs_release_and_leaves_prods_alone(tmp_path: Path) -> None:
    """helm-controller upgrades a release when its chart's version or its values' digest
    changes. Before ADR 188 a dev change increased the one chart's version, so prod's
    release was rebuilt and upgraded too (its provision hook run again); and the version
    could not leave values-dev.yaml out, since source-controller serves the chart it built
    before, valuesFiles merged in, while the version stays."""
    out, (before, after) = _example_inputs(tmp_path)
    reasons = {env: upgrade_reason(before[env], after[env]) for env in ("dev", "prod")}
    print(f"upgrades after a dev change: {reasons}")
    assert reasons == {"dev": "its values changed", "prod": None}
    # and what dev's release installs is what helm install -f values-dev.yaml does
    as_flux = render(out, env="dev", renderer="helm", sync="flux").objects
    assert as_flux == render(out, env="dev", renderer="helm").objects
    jobs = {o["metadata"]["name"]: o for o in as_flux if o["kind"] == "Job"}
    double = next(o for name, o in jobs.items() if "-double-" in name)
    assert double["spec"]["parallelism"] == 2
