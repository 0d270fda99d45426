"""The environment's pod options on rendered objects: pull Secrets, ServiceAccount and
topology spread on vf's pods, extra labels and annotations on every object and pod."""

from __future__ import annotations

from typing import Any

from vf import names
from vf.ir.records import PodOptions
from vf.render.security import peer_selector
from vf.textio.objects import Obj
from vf_runtime.constants import HEALTH_PORT
from vf_runtime.labels import (
    COMPONENT,
    FLOW_LABEL,
    MANAGED_BY,
    MANAGER,
    METRICS_LABEL,
    NODE_LABEL,
    OPTIONAL_LABEL,
    PROVISION,
)

ZONE = "topology.kubernetes.io/zone"
_SPREAD_KINDS = ("Deployment", "StatefulSet")


def apply_pod_options(objects: list[Obj], *, options: PodOptions) -> None:
    """Change ``objects`` in place: each one vf rendered for the environment."""
    for obj in objects:
        _merge(obj["metadata"], labels=options.labels, annotations=options.annotations)
        template = (obj.get("spec") or {}).get("template")
        if obj["kind"] not in ("Deployment", "StatefulSet", "Job") or template is None:
            continue
        _merge(template.setdefault("metadata", {}), **_pod_meta(options))
        if not _ours(obj):
            continue  # the broker and store keep their own pod settings
        pod = template["spec"]
        if options.image_pull_secrets:
            pod["imagePullSecrets"] = [{"name": n} for n in options.image_pull_secrets]
        if options.service_account is not None:
            pod["serviceAccountName"] = options.service_account
        if options.topology_spread and _spreads(obj):
            selector = obj["spec"]["selector"]["matchLabels"]
            pod["topologySpreadConstraints"] = [
                {
                    "labelSelector": {"matchLabels": dict(selector)},
                    "maxSkew": 1,
                    "topologyKey": ZONE,
                    "whenUnsatisfiable": "ScheduleAnyway",
                }
            ]


def priority_class(name: str | None, *, options: PodOptions) -> list[Obj]:
    """The PriorityClass the pods name, when vf.yaml asks vf to create it (cluster-wide:
    one flow owns it, the others only name it)."""
    if name is None or options.priority_class_value is None:
        return []
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name, "labels": {MANAGED_BY: MANAGER}},
            "value": options.priority_class_value,
            "globalDefault": False,
            "preemptionPolicy": "PreemptLowerPriority",
            "description": "pods of vf flows that name it",
        }
    ]


def _ours(obj: Obj) -> bool:
    """A worker or the provision Job (the flow's image), not the broker or the store."""
    labels = obj["metadata"].get("labels") or {}
    return NODE_LABEL in labels or labels.get(COMPONENT) == PROVISION


def _pod_meta(options: PodOptions) -> dict[str, Any]:
    return {"labels": options.labels, "annotations": options.annotations}


def _spreads(obj: Obj) -> bool:
    """Long-running pods: one zone's loss should not take them all. Whatever their replica
    count, so that scaling them (by hand, by KEDA or by a recompile) never changes their pod
    template, which would restart them instead."""
    return obj["kind"] in _SPREAD_KINDS and "selector" in obj["spec"]


def _merge(meta: Obj, *, labels: Any, annotations: Any) -> None:
    """Extra labels and annotations; vf's own keys win (selectors and hashes rest on them)."""
    if labels:
        meta["labels"] = {**dict(labels), **(meta.get("labels") or {})}
    if annotations:
        meta["annotations"] = {**dict(annotations), **(meta.get("annotations") or {})}


def metrics_objects(
    objects: list[Obj], *, options: PodOptions, flow_policy: str, flow: str, namespace: str
) -> list[Obj]:
    """Scraping the workers' ``/metrics``: the flow's policy admits the named readers on the
    health port, and with ``service_monitor`` a headless Service and a ServiceMonitor."""
    if options.metrics_from:
        policy = next(
            o
            for o in objects
            if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == flow_policy
        )
        policy["spec"]["ingress"] = [
            {
                "from": [peer_selector(p) for p in options.metrics_from],
                "ports": [{"port": HEALTH_PORT, "protocol": "TCP"}],
            }
        ]
    if not options.service_monitor:
        return []
    name = names.k8s_name("vf", flow, "metrics")
    labels = {MANAGED_BY: MANAGER, FLOW_LABEL: flow, METRICS_LABEL: "true"}
    optional = {**labels, OPTIONAL_LABEL: "true"}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "clusterIP": "None",
            "ports": [{"name": "health", "port": HEALTH_PORT, "targetPort": "health"}],
            "selector": {FLOW_LABEL: flow},
        },
    }
    monitor = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        # optional: a cluster without the Prometheus Operator runs the flow without it
        "metadata": {"name": name, "namespace": namespace, "labels": optional},
        "spec": {
            "endpoints": [{"interval": "30s", "path": "/metrics", "port": "health"}],
            "selector": {"matchLabels": {FLOW_LABEL: flow, METRICS_LABEL: "true"}},
        },
    }
    return [service, monitor]
