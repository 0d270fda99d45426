"""Platform defaults on vf's pods (``pods:`` in vf.yaml): requests by default (overridable),
image pull Secrets, a ServiceAccount, topology spread, extra labels and annotations."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.compiler.verify.test_crd_schemas import _errors, own_schema, upstream_schema
from tests.graph_sources import NODES
from tests.support import EXAMPLE_NAMES
from vf.emit.ordering import (
    FLUX_PRUNE,
    HELM_RESOURCE_POLICY,
    SYNC_OPTIONS,
    with_helm_hooks,
    with_sync_waves,
)
from vf.errors import VfError
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.runtree.argocd_sync import deletable
from vf.runtree.flux_gc import never_pruned

Obj = dict[str, Any]
GRAPH = (
    NODES
    + """

def build_flow():
    work = Work(name="work", nb_tasks=2)(Src(name="src"))
    return Flow([Sink(name="sink")(work)], flow_type={kind}, flow_id="pods")
"""
)
CONFIG = """environments:
  dev:
    images: {{default: r.io/a:1}}
{pods}"""
OPTIONS = """    pods:
      default_requests: {cpu: 250m}
      image_pull_secrets: [regcred]
      service_account: pods-worker
      labels: {team: vision}
      annotations: {example.com/owner: vision@example.com}
"""


def _pods(objects: list[Obj]) -> list[tuple[Obj, Obj]]:
    return [
        (o, o["spec"]["template"])
        for o in objects
        if o["kind"] in ("Deployment", "StatefulSet", "Job")
    ]


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_no_pod_is_best_effort(example: str, compiled_examples: dict[str, CompileResult]) -> None:
    best_effort = [
        obj["metadata"]["name"]
        for objects in compiled_examples[example].objects.values()
        for obj, template in _pods(objects)
        if not all(
            (c.get("resources") or {}).get("requests") for c in template["spec"]["containers"]
        )
    ]
    assert best_effort == []


def _compile(write_graph: Callable[..., Path], *, kind: str, pods: str) -> list[Obj]:
    graph = write_graph(GRAPH.format(kind=kind), CONFIG.format(pods=pods))
    return compile_project(CompileRequest(graph=str(graph))).objects["dev"]


@pytest.mark.parametrize("kind", ["REALTIME", "BATCH"])
def test_pod_options_reach_every_worker_and_only_labels_reach_the_broker(
    write_graph: Callable[..., Path], kind: str
) -> None:
    objects = _compile(write_graph, kind=kind, pods=OPTIONS)
    for obj, template in _pods(objects):
        labels = obj["metadata"]["labels"]
        assert labels["team"] == "vision" and template["metadata"]["labels"]["team"] == "vision"
        ann = template["metadata"]["annotations"]
        assert ann["example.com/owner"] == "vision@example.com"
        pod = template["spec"]
        if "vf.dev/infra" in labels:
            assert "serviceAccountName" not in pod and "imagePullSecrets" not in pod
            continue
        assert pod["serviceAccountName"] == "pods-worker"
        assert pod["imagePullSecrets"] == [{"name": "regcred"}]
        requests = pod["containers"][0]["resources"]["requests"]
        if "vf.dev/node" in labels:  # the provision Job has requests of its own
            assert requests["cpu"] == "250m" and "memory" not in requests
        spread = pod.get("topologySpreadConstraints")
        if obj["kind"] in ("Deployment", "StatefulSet"):  # any replica count: scaling keeps it
            assert spread and spread[0]["topologyKey"] == "topology.kubernetes.io/zone"
            assert (
                spread[0]["labelSelector"]["matchLabels"] == obj["spec"]["selector"]["matchLabels"]
            )
        else:
            assert spread is None
    assert all("team" in o["metadata"].get("labels", {}) for o in objects)


def test_a_changed_pod_option_gives_batch_jobs_new_names(write_graph: Callable[..., Path]) -> None:
    def jobs(pods: str) -> set[str]:
        objects = _compile(write_graph, kind="BATCH", pods=pods)
        return {o["metadata"]["name"] for o in objects if o["kind"] == "Job"}

    assert not jobs("") & jobs(OPTIONS)  # every Job's pod template changed: new names


def test_default_requests_can_be_turned_off(write_graph: Callable[..., Path]) -> None:
    objects = _compile(write_graph, kind="REALTIME", pods="    pods: {default_requests: null}\n")
    workers = [t for o, t in _pods(objects) if "vf.dev/node" in o["metadata"]["labels"]]
    assert workers and all(
        "requests" not in t["spec"]["containers"][0].get("resources", {}) for t in workers
    )


def test_a_priority_class_is_emitted_only_when_asked_for_and_named(
    write_graph: Callable[..., Path],
) -> None:
    pods = "    priority_class: vision-high\n    pods: {priority_class_value: 100000}\n"
    objects = _compile(write_graph, kind="REALTIME", pods=pods)
    (made,) = [o for o in objects if o["kind"] == "PriorityClass"]
    assert made["metadata"]["name"] == "vision-high" and made["value"] == 100000
    assert "namespace" not in made["metadata"]  # cluster-wide
    workers = [t for o, t in _pods(objects) if "vf.dev/node" in o["metadata"]["labels"]]
    assert all(t["spec"]["priorityClassName"] == "vision-high" for t in workers)
    with pytest.raises(VfError) as unnamed:
        _compile(write_graph, kind="REALTIME", pods="    pods: {priority_class_value: 1}\n")
    assert unnamed.value.code == "VF_CONFIG_WORKLOAD"


def test_a_priority_class_outlives_the_flow_that_creates_it_in_every_tool(
    write_graph: Callable[..., Path],
) -> None:
    """Other flows' pods name it: the Namespace's keep annotations, and the run-tree models
    of a prune and of an Application's deletion keep it."""
    pods = "    priority_class: vision-high\n    pods: {priority_class_value: 100000}\n"
    objects = _compile(write_graph, kind="REALTIME", pods=pods)
    (made,) = [o for o in objects if o["kind"] == "PriorityClass"]
    kustomize = with_sync_waves(made)
    assert kustomize["metadata"]["annotations"][SYNC_OPTIONS] == "Prune=false,Delete=false"
    assert kustomize["metadata"]["annotations"][FLUX_PRUNE] == "disabled"
    helm = with_helm_hooks(made)
    assert helm["metadata"]["annotations"] == {HELM_RESOURCE_POLICY: "keep"}
    for copy in (kustomize, helm):
        assert not deletable(copy) and never_pruned(copy)


def test_metrics_readers_may_scrape_and_get_a_service_monitor(
    write_graph: Callable[..., Path],
) -> None:
    pods = (
        "    pods:\n      metrics:\n        service_monitor: true\n"
        "        from: [{namespace: monitoring, pod_labels: {app: prometheus}}]\n"
    )
    objects = _compile(write_graph, kind="REALTIME", pods=pods)
    (policy,) = [o for o in objects if o["metadata"]["name"] == "vf-pods-netpol"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": 8080, "protocol": "TCP"}]
    assert rule["from"][0]["namespaceSelector"]["matchLabels"] == {
        "kubernetes.io/metadata.name": "monitoring"
    }
    (monitor,) = [o for o in objects if o["kind"] == "ServiceMonitor"]
    assert _errors(own_schema(monitor), monitor) == []
    assert _errors(upstream_schema(monitor), monitor) == []
    (service,) = [
        o for o in objects if o["kind"] == "Service" and "metrics" in o["metadata"]["name"]
    ]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert service["spec"]["selector"] == {"vf.dev/flow": "pods"}
    plain = _compile(write_graph, kind="REALTIME", pods="")
    assert not [o for o in plain if o["kind"] == "ServiceMonitor"]
    assert (
        "ingress"
        not in next(
            o
            for o in plain
            if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "vf-pods-netpol"
        )["spec"]
    )
