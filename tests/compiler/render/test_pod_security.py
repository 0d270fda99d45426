"""Pod Security: every pod of every example meets the "restricted" profile with a read-only
root filesystem, host paths are the named exception, and the namespace labels are offered."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.pod_security import pod_specs, restricted_violations
from tests.support import EXAMPLE_ENVS
from vf.cli import cli
from vf.emit.ordering import (
    FLUX_PRUNE,
    HELM_RESOURCE_POLICY,
    SYNC_OPTIONS,
    with_helm_hooks,
    with_sync_waves,
)
from vf.pipeline import CompileResult

Obj = dict[str, Any]
PSA = "pod-security.kubernetes.io"


def _plan(result: CompileResult, env: str) -> Any:
    return next(p for p in result.plans if p.environment == env)


@pytest.mark.parametrize(("example", "env"), EXAMPLE_ENVS)
def test_every_pod_is_restricted_except_declared_host_paths(
    example: str, env: str, compiled_examples: dict[str, CompileResult]
) -> None:
    result = compiled_examples[example]
    plan = _plan(result, env)
    pods = dict(pod_specs(result.objects[env]))
    assert len(pods) >= len(plan.workloads) + 1  # workers, the provision Job, infrastructure
    with_host_paths = set()
    for name, pod in pods.items():
        problems = restricted_violations(pod)
        if any("'hostPath'" in p for p in problems):
            with_host_paths.add(name)
        assert [p for p in problems if "'hostPath'" not in p] == [], name
    declared = {
        f"{w.kind}/{w.name}" for w in plan.workloads if w.node in plan.security.host_path_nodes
    }
    assert with_host_paths == declared
    assert plan.security.pod_security_level == ("privileged" if declared else "restricted")
    assert any("host-path mounts" in w for w in plan.warnings) == bool(declared)


def test_the_examples_cover_a_host_path_exception(
    compiled_examples: dict[str, CompileResult],
) -> None:
    plan = _plan(compiled_examples["realtime_cameras"], "dev")
    assert plan.security.host_path_nodes
    assert plan.security.pod_security_level == "privileged"


RESTRICTED_POD: Obj = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [
        {
            "name": "c",
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "readOnlyRootFilesystem": True,
            },
        }
    ],
    "volumes": [{"name": "tmp", "emptyDir": {}}],
}


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("hostNetwork",), True, "hostNetwork"),
        (("volumes", 0), {"name": "h", "hostPath": {"path": "/"}}, "'hostPath'"),
        (("securityContext", "runAsNonRoot"), False, "runAsNonRoot"),
        (("securityContext", "seccompProfile"), {"type": "Unconfined"}, "seccompProfile"),
        (("containers", 0, "securityContext", "privileged"), True, "privileged"),
        (("containers", 0, "securityContext", "allowPrivilegeEscalation"), True, "Escalation"),
        (("containers", 0, "securityContext", "capabilities"), {"add": ["NET_ADMIN"]}, "ALL"),
        (("containers", 0, "securityContext", "readOnlyRootFilesystem"), False, "writable"),
        (("containers", 0, "securityContext", "runAsUser"), 0, "runAsUser is 0"),
        (("containers", 0, "ports"), [{"containerPort": 80, "hostPort": 80}], "hostPort"),
    ],
)
def test_the_checker_finds_each_violation(path: tuple[Any, ...], value: Any, expected: str) -> None:
    assert restricted_violations(RESTRICTED_POD) == []
    pod = copy.deepcopy(RESTRICTED_POD)
    target: Any = pod
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    assert any(expected in p for p in restricted_violations(pod))


def _vf_owned_pods(objects: list[Obj]) -> dict[str, Obj]:
    """Pods whose size vf decides: infrastructure and the provision Job (not workers)."""
    owned = {}
    for obj in objects:
        labels = obj["metadata"].get("labels") or {}
        if obj["kind"] in ("Deployment", "StatefulSet", "Job") and "vf.dev/node" not in labels:
            owned[f"{obj['kind']}/{obj['metadata']['name']}"] = obj["spec"]["template"]["spec"]
    return owned


@pytest.mark.parametrize(("example", "env"), EXAMPLE_ENVS)
def test_vf_owned_pods_request_cpu_and_memory_and_limit_memory(
    example: str, env: str, compiled_examples: dict[str, CompileResult]
) -> None:
    """What the checkov suppressions CKV_K8S_10/12/13 leave to the operator, vf does itself."""
    owned = _vf_owned_pods(compiled_examples[example].objects[env])
    assert any(name.startswith("Job/") for name in owned)
    for name, pod in owned.items():
        for container in pod["containers"]:
            resources = container["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]), name
            assert "memory" in resources["limits"], name


def test_namespace_labels_are_an_opt_in_component(
    compiled_examples: dict[str, CompileResult],
) -> None:
    result = compiled_examples["batch_pipeline"]
    prod = [o for o in result.objects["prod"] if o["kind"] == "Namespace"]
    assert [o for o in result.objects["dev"] if o["kind"] == "Namespace"] == []
    assert [o["metadata"]["name"] for o in prod] == ["pipelines"]
    labels = prod[0]["metadata"]["labels"]
    assert labels[f"{PSA}/enforce"] == "restricted"
    assert labels[f"{PSA}/enforce-version"] == "v1.34"
    assert labels[f"{PSA}/warn"] == labels[f"{PSA}/audit"] == "restricted"
    tree = result.tree
    assert "components/pod-security-prod/namespace-pipelines.yaml" in tree
    assert '"../../components/pod-security-prod"' in tree["overlays/prod/kustomization.yaml"]
    assert "pod-security" not in tree["overlays/dev/kustomization.yaml"]


def test_a_namespace_is_never_pruned_or_uninstalled() -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}}
    kustomize = with_sync_waves(namespace)["metadata"]["annotations"]
    assert kustomize[SYNC_OPTIONS] == "Prune=false,Delete=false"
    assert kustomize[FLUX_PRUNE] == "disabled"
    assert with_helm_hooks(namespace)["metadata"]["annotations"] == {HELM_RESOURCE_POLICY: "keep"}


GRAPH = """
from vf import BATCH, Consumer, Flow, Producer


class Src(Producer):
    def next(self):
        raise StopIteration


class Sink(Consumer):
    def consume(self, x):
        pass


def build_flow():
    return Flow([Sink()(Src())], flow_type=BATCH)
"""
CONFIG = """environments:
  dev:
    images:
      default: r.io/a:1
    pod_security:
      namespace_labels: true
    mounts:
      {mounts}
"""


def test_labelled_namespace_refuses_host_paths_by_name(write_graph: Callable[..., Path]) -> None:
    graph = write_graph(GRAPH, CONFIG.format(mounts="sink: ['/srv/data:/data:ro']"))
    result = CliRunner().invoke(cli, ["validate", str(graph)])
    assert result.exit_code == 2, result.output
    assert "error[VF_CONFIG_POD_SECURITY]" in result.output
    assert "sink" in result.output
    assert "claim:/path" in result.output


def test_labelled_namespace_accepts_claim_mounts(write_graph: Callable[..., Path]) -> None:
    graph = write_graph(GRAPH, CONFIG.format(mounts="sink: ['data:/data:ro']"))
    result = CliRunner().invoke(cli, ["validate", str(graph)])
    assert result.exit_code == 0, result.output
