"""An object of an API the cluster may lack (KEDA's ScaledObject, the Prometheus Operator's
ServiceMonitor and PrometheusRule) leaves the rest of the flow deliverable (ADR 0202): Argo CD
skips its dry-run and applies it in the last wave, Flux holds it in a Kustomization of its
own that nothing depends on, the chart renders it only where Helm's discovery finds its API,
and the tree's README lists it with the vf.yaml switch that removes it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.graph_sources import LIVE_CHAIN
from tests.support import helm_template, kustomize_build, parse_docs
from vf.pipeline import CompileRequest, compile_project
from vf.runtree.flux_sync import kustomizations, part_objects
from vf.runtree.manifests import asked_apis
from vf.tree.write import write_tree

GRAPH = LIVE_CHAIN.format(flow_id="opt")
CONFIG = """environments:
  dev:
    namespace: opt-dev
    images: {{default: r.io/a:1}}
    autoscaling: {{enabled: true}}
    pods: {{metrics: {{service_monitor: {monitor}}}}}
    observability: {{alerts: {monitor}}}
gitops:
  repo_url: https://git.example.com/a/b.git
  path: deploy
  argocd: {{}}
  flux: {{}}
"""
OPTIONAL = {"ScaledObject", "ServiceMonitor", "PrometheusRule"}
Obj = dict[str, Any]


def _tree(write_graph: Callable[..., Path], *, monitor: bool = True) -> Path:
    graph = write_graph(GRAPH, CONFIG.format(monitor=str(monitor).lower()))
    out = graph.parent / "deploy"
    write_tree(out, compile_project(CompileRequest(graph=str(graph), out=out)).tree)
    return out


def _overlay(out: Path, kubectl: str) -> list[Obj]:
    return parse_docs(kustomize_build(kubectl, out / "overlays" / "dev"))


def test_argocd_syncs_the_rest_first_and_skips_their_dry_run(
    write_graph: Callable[..., Path], kubectl: str
) -> None:
    objects = _overlay(_tree(write_graph), kubectl)
    optional = [o for o in objects if o["kind"] in OPTIONAL]
    assert {o["kind"] for o in optional} == OPTIONAL
    waves = {int(o["metadata"].get("annotations", {}).get("argocd.argoproj.io/sync-wave", 0))
             for o in objects}  # fmt: skip
    for obj in optional:
        annotations = obj["metadata"]["annotations"]
        assert "SkipDryRunOnMissingResource=true" in annotations[
            "argocd.argoproj.io/sync-options"
        ].split(",")
        assert int(annotations["argocd.argoproj.io/sync-wave"]) == max(waves)  # the last


def test_flux_holds_them_in_a_part_of_their_own_that_nothing_depends_on(
    write_graph: Callable[..., Path], kubectl: str
) -> None:
    out = _tree(write_graph)
    objects = _overlay(out, kubectl)
    parts = kustomizations(out, env="dev")
    names = [p["metadata"]["name"] for p in parts]
    print(f"Flux parts: {names}")
    assert names == ["opt-dev-infra", "opt-dev", "opt-dev-optional"]
    held = [part_objects(p["spec"], objects) for p in parts]
    keys = [{(o["kind"], o["metadata"]["name"]) for o in h} for h in held]
    assert sum(len(k) for k in keys) == len(objects)  # each object in exactly one part
    assert set().union(*keys) == {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert {k for k, _ in keys[2]} == OPTIONAL and not any(k in OPTIONAL for k, _ in keys[1])
    assert parts[2]["spec"]["dependsOn"] == [{"name": "opt-dev-gitops"}, {"name": "opt-dev"}]
    assert not any(
        d["name"] == "opt-dev-optional" for p in parts for d in p["spec"].get("dependsOn", [])
    )
    listed = parse_docs((out / "gitops" / "flux" / "kustomization.yaml").read_text())[0]
    assert "kustomization-dev-optional.yaml" in listed["resources"]


def test_the_chart_renders_them_only_where_the_cluster_serves_their_api(
    write_graph: Callable[..., Path], helm: str
) -> None:
    chart = _tree(write_graph) / "chart"
    assert asked_apis(chart) == [
        "keda.sh/v1alpha1/ScaledObject",
        "monitoring.coreos.com/v1/PrometheusRule",
        "monitoring.coreos.com/v1/ServiceMonitor",
    ]
    values = ("-f", str(chart / "values-dev.yaml"), "--namespace", "opt-dev", "--skip-tests")
    kinds = {}
    for served in ((), ("monitoring.coreos.com/v1/ServiceMonitor",), tuple(asked_apis(chart))):
        done = helm_template(helm, chart, *values, apis=served)
        assert done.returncode == 0, done.stderr
        kinds[served] = {o["kind"] for o in parse_docs(done.stdout)}
    print({k: sorted(v & OPTIONAL) for k, v in kinds.items()})
    bare, monitored, full = kinds.values()
    assert not bare & OPTIONAL and "Deployment" in bare
    assert monitored & OPTIONAL == {"ServiceMonitor"}
    assert full & OPTIONAL == OPTIONAL


def test_the_readme_lists_the_prometheus_operator_with_its_switch(
    write_graph: Callable[..., Path],
) -> None:
    for monitor in (True, False):
        readme = (_tree(write_graph, monitor=monitor) / "README.md").read_text()
        section = readme[readme.index("### `dev`") :]
        print(f"service_monitor {monitor}: {section.splitlines()[2:6]}")
        assert ("monitoring.coreos.com/v1" in section) is monitor
        assert ("environments.dev.pods.metrics.service_monitor: false" in section) is monitor
        assert ("environments.dev.observability.alerts: false" in section) is monitor
        assert "KEDA" in section and "Optional:" in section
        # a Failed operation is retried, then the revision is neither synced nor self-healed
        # (argo-cd controller/appcontroller.go, alreadyAttemptedSync)
        assert "then neither syncs nor self-heals that revision" in section
