"""What ``vf run-tree`` tells a Prometheus to scrape: the pods the tree's ServiceMonitor
selects through its Service, labelled as the Prometheus Operator's relabelling labels a
pod's target (ADR 0240). The objects are those vf compiles; the pods are made here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO
from vf.pipeline import CompileRequest, compile_project
from vf.runtree.pods import Pod
from vf.runtree.scrape import ScrapeFile, monitored, selects, target_groups
from vf_runtime.labels import FLOW_LABEL, NODE_LABEL

FLOWS = REPO / "tests" / "runtree_flows"
CONFIG = """environments:
  dev:
    namespace: watched
    images: {default: registry.example.com/vf/tree-tests:1}
    pods: {metrics: {service_monitor: %s}}
"""
FLOW = "tree-observed"


def _objects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, monitor: bool) -> list[Any]:
    config = tmp_path / "vf.yaml"
    config.write_text(CONFIG % ("true" if monitor else "false"), encoding="utf-8")
    monkeypatch.setenv("VF_TEST_OUT", "/results/sink.jsonl")
    request = CompileRequest(graph=str(FLOWS / "observed.py"), config=str(config))
    return list(compile_project(request).objects["dev"])


def _pod(name: str, *, node: str | None, namespace: str = "watched", phase: str = "Running") -> Pod:
    labels = {FLOW_LABEL: FLOW} | ({NODE_LABEL: node} if node else {})
    pod = Pod(
        name=name,
        namespace=namespace,
        owner=("Deployment", namespace, name.rsplit("-", 1)[0]),
        labels=labels,
        restart_policy="Always",
        containers=[],
        init=[],
    )
    pod.phase = phase
    return pod


def _spec(objects: list[Any], pod: Pod) -> Any:
    """The pod spec of the workload the pod's node label names (a broker pod: none)."""
    for obj in objects:
        template = (obj.get("spec") or {}).get("template") or {}
        labels = (template.get("metadata") or {}).get("labels") or {}
        if NODE_LABEL in pod.labels and labels.get(NODE_LABEL) == pod.labels[NODE_LABEL]:
            return template["spec"]
    return {"containers": [{"name": "nats", "ports": [{"name": "client", "containerPort": 4222}]}]}


def _groups(objects: list[Any], pods: list[Pod]) -> list[Any]:
    ports = {pod.name: 20000 + n for n, pod in enumerate(pods)}
    return target_groups(
        objects,
        pods,
        spec_of=lambda pod: _spec(objects, pod),
        port_for=lambda namespace, pod, number: ports[pod] if number == 8080 else 1,
    )


def test_every_live_worker_pod_is_a_target_labelled_as_the_operator_labels_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = _objects(tmp_path, monkeypatch, monitor=True)
    assert monitored(objects, absent_kinds=frozenset())
    assert not monitored(objects, absent_kinds=frozenset({"ServiceMonitor"}))
    pods = [
        _pod("double-a", node="double"),
        _pod("double-b", node="double", phase="Pending"),  # not ready yet: still scraped
        _pod("sink-a", node="sink"),
        _pod("numbers-a", node="numbers"),
        _pod("gone-a", node="double", phase="Failed"),
        _pod("done-a", node="sink", phase="Succeeded"),
        _pod("other-a", node="double", namespace="elsewhere"),
        _pod("nats-a", node=None),  # selected by the Service, but has no health port
    ]
    leaving = _pod("leaving-a", node="double")
    leaving.terminating_since = 1.0  # a deleted pod leaves the Service's endpoints
    groups = _groups(objects, [*pods, leaving])
    print(json.dumps([g.document() for g in groups], indent=1))
    assert [g.labels["pod"] for g in groups] == ["double-a", "double-b", "numbers-a", "sink-a"]
    first = groups[0]
    assert first.targets == ("127.0.0.1:20000",)
    service = f"vf-{FLOW}-metrics"
    assert dict(first.labels) == {
        "namespace": "watched",
        "service": service,
        "pod": "double-a",
        "container": "worker",
        "endpoint": "health",
        "job": service,
        "__metrics_path__": "/metrics",
    }
    # the worker's own flow, node and replica labels are never target labels (they would
    # be renamed exported_*)
    assert not any({"flow", "node", "replica"} & set(g.labels) for g in groups)


def test_without_a_service_monitor_nothing_is_scraped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = _objects(tmp_path, monkeypatch, monitor=False)
    assert not monitored(objects, absent_kinds=frozenset())
    assert _groups(objects, [_pod("double-a", node="double")]) == []


def test_label_selectors_match_as_kubernetes_matches_them() -> None:
    labels = {"a": "1", "b": "2"}
    assert selects({"matchLabels": {"a": "1"}}, labels)
    assert not selects({"matchLabels": {"a": "2"}}, labels)
    assert selects({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, labels)
    assert not selects(
        {"matchExpressions": [{"key": "b", "operator": "NotIn", "values": ["2"]}]}, labels
    )
    assert selects({"matchExpressions": [{"key": "c", "operator": "DoesNotExist"}]}, labels)
    assert not selects({"matchExpressions": [{"key": "c", "operator": "Exists"}]}, labels)
    assert selects(None, labels)


def test_the_file_is_run_locals_form_and_rewritten_only_when_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = _objects(tmp_path, monkeypatch, monitor=True)
    path = tmp_path / "prometheus-targets.json"
    logged: list[str] = []
    scrape = ScrapeFile(path=path, log=logged.append)
    scrape.update(_groups(objects, [_pod("sink-a", node="sink")]))
    (group,) = json.loads(path.read_text())
    assert group["targets"] == ["127.0.0.1:20000"] and group["labels"]["pod"] == "sink-a"
    path.write_text("left alone")  # the same targets again: the file is not rewritten
    scrape.update(_groups(objects, [_pod("sink-a", node="sink")]))
    assert path.read_text() == "left alone"
    scrape.update([])
    assert json.loads(path.read_text()) == []
    assert logged == []
