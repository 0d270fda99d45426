"""The AppProject a locked-down Argo CD needs for one environment of a flow: its
repository, the environment's destination, the Namespace and exactly the kinds its
overlay holds."""

from __future__ import annotations

from ruamel.yaml import YAML

from tests.compiler.verify.test_crd_schemas import _errors, own_schema, upstream_schema
from vf.pipeline import CompileResult


def test_the_app_project_admits_exactly_the_flows_kinds_and_destinations(
    compiled_examples: dict[str, CompileResult],
) -> None:
    result = compiled_examples["realtime_cameras"]
    for plan in result.plans:
        env = plan.environment
        project = YAML(typ="safe").load(result.tree[f"gitops/argocd/appproject-{env}.yaml"])
        assert _errors(own_schema(project), project) == []
        assert _errors(upstream_schema(project), project) == []
        spec = project["spec"]
        assert project["metadata"]["name"] == f"vision-{env}"
        assert spec["sourceRepos"] == ["https://git.example.com/vision/cameras-deploy.git"]
        assert [d["namespace"] for d in spec["destinations"]] == [plan.namespace]
        allowed = {(k["group"], k["kind"]) for k in spec["namespaceResourceWhitelist"]}
        emitted = {
            (str(o["apiVersion"]).rpartition("/")[0], o["kind"])
            for o in result.objects[env]
            if o["kind"] not in ("Namespace", "PriorityClass")
        }
        print(f"{env}: namespaced kinds allowed: {sorted(allowed)}")
        assert allowed == emitted
        assert {"group": "", "kind": "Namespace"} in spec["clusterResourceWhitelist"]
        application = YAML(typ="safe").load(result.tree[f"gitops/argocd/application-{env}.yaml"])
        assert application["spec"]["project"] == f"vision-{env}"
        root = YAML(typ="safe").load(result.tree[f"gitops/argocd/root-{env}.yaml"])
        include = root["spec"]["source"]["directory"]["include"]
        assert include == f"{{application-{env}.yaml,appproject-{env}.yaml,root-{env}.yaml}}"
