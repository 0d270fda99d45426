"""What Flux gets: a health signal for both flow types, refs for branches, tags, semver
ranges and commits, a secretRef for private sources, the OCI layout and an optional
HelmRelease; every object checked against vf's and the upstream CRD schemas."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.compiler.verify.test_crd_schemas import _errors, own_schema, upstream_schema
from tests.support import kustomize_build
from vf.emit.gitops.flux_helm import values_config_map
from vf.errors import VfError
from vf.ir.delivery import Flux
from vf.pipeline import CompileRequest, compile_project
from vf.tree.write import write_tree

Obj = dict[str, Any]
GRAPH = """
from vf import {kind}, Consumer, Flow, Processor, Producer


class Src(Producer):
    def next(self):
        return 1


class Sink(Consumer):
    def consume(self, x):
        pass


def build_flow():
    return Flow([Sink(name="sink")(Src(name="src"))], flow_type={kind}, flow_id="fx")
"""
ENVS = """environments:
  dev:
    namespace: fx-dev
    images: {default: r.io/a:1}
    broker: {profile: dev}
    payload_store: {profile: dev}
"""


def _tree(
    write_graph: Callable[..., Path], *, flux: str, kind: str = "BATCH", extra: str = ""
) -> dict[str, str]:
    config = (
        ENVS + "gitops:\n  repo_url: " + (extra or "https://git.example.com/a/b.git") + "\n"
        "  path: deploy/fx\n" + flux
    )
    graph = write_graph(GRAPH.format(kind=kind), config)
    return compile_project(CompileRequest(graph=str(graph))).tree


def _flux(
    write_graph: Callable[..., Path], *, flux: str, kind: str = "BATCH", extra: str = ""
) -> dict[str, Obj]:
    tree = _tree(write_graph, flux=flux, kind=kind, extra=extra)
    yaml = YAML(typ="safe")
    found = {
        path.rsplit("/", 1)[1]: yaml.load(text)
        for path, text in tree.items()
        if path.startswith("gitops/flux/") and not path.endswith("/kustomization.yaml")
    }
    for obj in found.values():
        if "/" not in obj["apiVersion"]:
            continue  # a core object (the values ConfigMap): no custom resource schema
        assert _errors(own_schema(obj), obj) == [], obj["kind"]
        assert _errors(upstream_schema(obj), obj) == [], obj["kind"]
    return found


@pytest.mark.parametrize(
    ("revision", "ref"),
    [
        ("main", {"branch": "main"}),
        ("v1.2.0", {"tag": "v1.2.0"}),
        ("1.4.0-rc.1", {"tag": "1.4.0-rc.1"}),
        (">=1.0.0", {"semver": ">=1.0.0"}),
        ("1.x", {"semver": "1.x"}),
        (
            "0123456789abcdef0123456789abcdef01234567",
            {"commit": "0123456789abcdef0123456789abcdef01234567"},
        ),
        ("refs/heads/feature", {"name": "refs/heads/feature"}),
    ],
)
def test_each_revision_is_the_ref_it_looks_like(
    write_graph: Callable[..., Path], revision: str, ref: dict[str, str]
) -> None:
    found = _flux(write_graph, flux=f"  revision: {revision!r}\n  flux: {{}}\n")
    assert found["gitrepository.yaml"]["spec"]["ref"] == ref


def test_a_declared_revision_type_wins(write_graph: Callable[..., Path]) -> None:
    found = _flux(write_graph, flux="  revision: stable\n  flux: {revision_type: tag}\n")
    assert found["gitrepository.yaml"]["spec"]["ref"] == {"tag": "stable"}


def test_an_ssh_source_needs_and_gets_a_secret(write_graph: Callable[..., Path]) -> None:
    url = "ssh://git@git.example.com/a/b.git"
    with pytest.raises(VfError) as refused:
        _flux(write_graph, flux="  flux: {}\n", extra=url)
    assert refused.value.code == "VF_CONFIG_GITOPS" and "secret_ref" in str(refused.value.problems)
    found = _flux(write_graph, flux="  flux: {secret_ref: deploy-key}\n", extra=url)
    assert found["gitrepository.yaml"]["spec"]["secretRef"] == {"name": "deploy-key"}


def test_no_job_is_in_a_workers_wait_set(write_graph: Callable[..., Path]) -> None:
    """Whichever status reader judges a Job (Flux's own comes first unless it impersonates),
    the workers' health never waits on one: a batch longer than the timeout stays Ready."""
    found = _flux(write_graph, flux="  flux: {service_account: flux-fx, timeout: 1h}\n")
    infra, workers = (found[f"kustomization-dev{p}.yaml"]["spec"] for p in ("-infra", ""))
    assert infra["wait"] is True and infra["serviceAccountName"] == "flux-fx"
    assert infra["timeout"] == workers["timeout"] == "1h"
    assert workers["wait"] is False and workers["retryInterval"] == "2m"
    assert "healthChecks" not in workers and "healthCheckExprs" not in workers


def test_a_realtime_flow_checks_its_long_running_workers(write_graph: Callable[..., Path]) -> None:
    found = _flux(write_graph, flux="  flux: {}\n", kind="REALTIME")
    infra, workers = (found[f"kustomization-dev{p}.yaml"]["spec"] for p in ("-infra", ""))
    assert infra["wait"] is True and "healthChecks" not in infra
    assert workers["wait"] is False and infra["timeout"] == "5m"
    checked = {(c["kind"], c["name"].rsplit("-", 1)[1]) for c in workers["healthChecks"]}
    assert checked == {("Deployment", "sink")}  # the finite producer is a Job: not waited on
    assert all(c["namespace"] == "fx-dev" for c in workers["healthChecks"])


def test_an_oci_artifact_holds_the_tree_itself(write_graph: Callable[..., Path]) -> None:
    flux = "  flux:\n    source: {kind: OCIRepository, name: fx-artifact}\n"
    spec = _flux(write_graph, flux=flux)["kustomization-dev.yaml"]["spec"]
    assert spec["path"] == "./overlays/dev"
    assert spec["sourceRef"] == {"kind": "OCIRepository", "name": "fx-artifact"}


@pytest.mark.parametrize("kind", ["BATCH", "REALTIME"])
def test_a_helm_release_delivers_the_chart_instead(
    write_graph: Callable[..., Path], kind: str
) -> None:
    """The chart as it is (no valuesFiles: source-controller would merge them into the
    chart every environment's release builds), rebuilt when its version changes, not at
    every commit; the environment's values from a ConfigMap that holds values-<env>.yaml
    and that helm-controller watches (ADR 188); no failure uninstalls the flow, and a
    release never waits for its Jobs."""
    found = _flux(write_graph, flux="  flux: {helm_release: true, timeout: 20m}\n", kind=kind)
    assert "kustomization-dev.yaml" not in found
    spec = found["helmrelease-dev.yaml"]["spec"]
    chart = spec["chart"]["spec"]
    assert chart["chart"] == "./deploy/fx/chart"
    assert "valuesFiles" not in chart
    assert chart["reconcileStrategy"] == "ChartVersion"
    assert spec["valuesFrom"] == [
        {"kind": "ConfigMap", "name": "fx-dev-values", "valuesKey": "values.yaml"}
    ]
    values = found["configmap-dev-values.yaml"]
    assert values["metadata"]["name"] == "fx-dev-values"
    assert values["metadata"]["namespace"] == found["helmrelease-dev.yaml"]["metadata"]["namespace"]
    assert values["metadata"]["labels"]["reconcile.fluxcd.io/watch"] == "Enabled"
    assert spec["targetNamespace"] == "fx-dev" and spec["timeout"] == "20m"
    assert spec["test"] == {"enable": True}  # the chart's broker and store check runs
    assert spec["driftDetection"] == {"mode": "enabled"}
    install, upgrade = spec["install"], spec["upgrade"]
    assert "remediation" not in install  # an install's remediation is an uninstall
    assert install["strategy"] == {"name": "RetryOnFailure", "retryInterval": "2m"}
    # both flows' producer is a Job (a REALTIME flow's finite source): Helm never waits for
    # it, and a rollback would re-create the previous release's Job and replay its items
    assert install["disableWaitForJobs"] is True and upgrade["disableWaitForJobs"] is True
    assert "remediation" not in upgrade and upgrade["strategy"]["name"] == "RetryOnFailure"


def test_a_live_flow_without_jobs_rolls_back_a_failed_upgrade(
    write_graph: Callable[..., Path],
) -> None:
    """A REALTIME flow whose every worker is a Deployment or StatefulSet: the release
    waits for them, and a failed upgrade rolls back (ADR 206)."""
    source = GRAPH.format(kind="REALTIME").replace(
        'Src(name="src")', 'Src(name="src", is_finite=False)'
    )
    config = ENVS + (
        "gitops:\n  repo_url: https://git.example.com/a/b.git\n  path: deploy/fx\n"
        "  flux: {helm_release: true}\n"
    )
    tree = compile_project(CompileRequest(graph=str(write_graph(source, config)))).tree
    assert not [p for p in tree if p.startswith("overlays/dev/resources/job-") and "-src-" in p]
    release = YAML(typ="safe").load(tree["gitops/flux/helmrelease-dev.yaml"])["spec"]
    assert "disableWaitForJobs" not in release["install"]
    assert release["upgrade"]["remediation"] == {"retries": 3, "strategy": "rollback"}


def test_each_release_reads_its_values_file_from_its_configmap(
    write_graph: Callable[..., Path],
) -> None:
    """The ConfigMap holds values-<env>.yaml's text as it is, and gitops/flux lists it."""
    tree = _tree(write_graph, flux="  flux: {helm_release: true}\n")
    yaml = YAML(typ="safe")
    held = yaml.load(tree["gitops/flux/configmap-dev-values.yaml"])["data"]["values.yaml"]
    assert held == tree["chart/values-dev.yaml"]
    index = yaml.load(tree["gitops/flux/kustomization.yaml"])["resources"]
    assert index == [
        "configmap-dev-values.yaml",
        "gitrepository.yaml",
        "helmrelease-dev.yaml",
        "kustomization-dev-gitops.yaml",  # applies the rest, the values among them, at each commit
    ]


def test_a_helm_release_from_an_oci_artifact_is_refused(write_graph: Callable[..., Path]) -> None:
    flux = "  flux:\n    helm_release: true\n    source: {kind: OCIRepository, name: fx}\n"
    with pytest.raises(VfError) as refused:
        _flux(write_graph, flux=flux)
    assert refused.value.code == "VF_CONFIG_GITOPS"
    assert "OCIRepository" in str(refused.value.problems)


@pytest.mark.parametrize("example", ["batch_pipeline", "realtime_cameras"])
def test_infrastructure_then_workers_split_the_overlay(
    example: str, compiled_examples: dict[str, Any], tmp_path: Path, kubectl: str
) -> None:
    """Each part, built as Flux builds it (the overlay plus the Kustomization's patches,
    with the real kustomize), holds its own objects; together exactly the overlay's. The
    objects of an optional API (KEDA's ScaledObjects) are in a third part (ADR 0202)."""
    result = compiled_examples[example]
    write_tree(tmp_path / "deploy", result.tree)
    yaml = YAML(typ="safe")
    for env in result.objects:
        parts: dict[str, set[tuple[str, str]]] = {"-optional": set()}
        for part in ("-infra", "", "-optional"):
            path = f"gitops/flux/kustomization-{env}{part}.yaml"
            if path not in result.tree:
                continue
            flux = yaml.load(result.tree[path])
            folder = tmp_path / f"flux-{env}{part or '-workers'}"
            folder.mkdir()
            wrapper = {"resources": [f"../deploy/overlays/{env}"], **_only(flux["spec"])}
            (folder / "kustomization.yaml").write_text(json.dumps(wrapper), encoding="utf-8")
            built = yaml.load_all(kustomize_build(kubectl, folder))
            parts[part] = {(o["kind"], o["metadata"]["name"]) for o in built if o}
        whole = [
            o
            for o in yaml.load_all(kustomize_build(kubectl, tmp_path / "deploy" / "overlays" / env))
            if o
        ]
        infra, workers, optional = parts["-infra"], parts[""], parts["-optional"]
        assert infra | workers | optional == {(o["kind"], o["metadata"]["name"]) for o in whole}
        assert not infra & workers and not (infra | workers) & optional
        for obj in whole:
            labels = obj["metadata"].get("labels") or {}
            key = (obj["kind"], obj["metadata"]["name"])
            if obj["kind"] == "ScaledObject":
                assert key in optional, key
            elif "vf.dev/infra" in labels or obj["kind"] == "Namespace":
                assert key in infra, key
            elif "vf.dev/node" in labels:
                assert key in workers, key
        scaled = any(o["kind"] == "ScaledObject" for o in whole)
        assert bool(optional) is scaled, env
        assert any(kind == "Job" and "-provision-" in n for kind, n in parts[""])


def _only(spec: Obj) -> Obj:
    return {"patches": spec["patches"]}


def test_values_larger_than_a_configmap_holds_are_refused() -> None:
    """The API server refuses a ConfigMap whose data is over 1 MiB: refused at compile."""
    flux = Flux(helm_release=True)
    text = "a: " + "x" * (1024 * 1024) + "\n"
    with pytest.raises(VfError) as refused:
        values_config_map(text, flux=flux, flow_id="fx", env="dev")
    assert refused.value.code == "VF_CONFIG_GITOPS"
    assert "values-dev.yaml" in str(refused.value.problems)


@pytest.mark.parametrize(("kind", "wave"), [("BATCH", None), ("REALTIME", "1")])
def test_a_live_flows_finite_source_syncs_in_the_last_wave(
    write_graph: Callable[..., Path], kind: str, wave: str | None
) -> None:
    """Argo CD waits for a wave's Jobs to complete before the next wave: a REALTIME flow's
    finite producer in wave 0 held back its ScaledObjects and budgets until it finished
    (ADR 206). It syncs beside them; a BATCH flow's Jobs keep wave 0 (no annotation)."""
    tree = _tree(write_graph, flux="  argocd: {}\n", kind=kind)
    (job,) = [
        YAML(typ="safe").load(text)
        for path, text in tree.items()
        if path.startswith("overlays/dev/resources/job-") and "-src-" in path
    ]
    annotations = job["metadata"].get("annotations") or {}
    assert annotations.get("argocd.argoproj.io/sync-wave") == wave
