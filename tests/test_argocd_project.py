"""The AppProject a locked-down Argo CD needs for one flow: its repository, its
environments' destinations, the Namespace and exactly the kinds its overlays hold."""

from __future__ import annotations

from ruamel.yaml import YAML

from tests.test_crd_schemas import _errors, own_schema, upstream_schema
from vf.pipeline import CompileResult


def test_the_app_project_admits_exactly_the_flows_kinds_and_destinations(
    compiled_examples: dict[str, CompileResult],
) -> None:
    result = compiled_examples["realtime_cameras"]
    project = YAML(typ="safe").load(result.tree["gitops/argocd/appproject.yaml"])
    assert _errors(own_schema(project), project) == []
    assert _errors(upstream_schema(project), project) == []
    spec = project["spec"]
    assert project["metadata"]["name"] == "vision"
    assert spec["sourceRepos"] == ["https://git.example.com/vision/cameras-deploy.git"]
    assert {d["namespace"] for d in spec["destinations"]} == {p.namespace for p in result.plans}
    allowed = {(k["group"], k["kind"]) for k in spec["namespaceResourceWhitelist"]}
    emitted = {
        (str(o["apiVersion"]).rpartition("/")[0], o["kind"])
        for objects in result.objects.values()
        for o in objects
        if o["kind"] not in ("Namespace", "PriorityClass")
    }
    print(f"namespaced kinds allowed: {sorted(allowed)}")
    assert allowed == emitted and ("keda.sh", "ScaledObject") in allowed
    assert {"group": "", "kind": "Namespace"} in spec["clusterResourceWhitelist"]
    application = YAML(typ="safe").load(result.tree["gitops/argocd/application-dev.yaml"])
    assert application["spec"]["project"] == "vision"
