"""What an environment's objects assume of the cluster, for the tree's README (ADR 153).

Read from the objects themselves, so the list is exactly what the overlay and the chart
need: an API the cluster must serve (KEDA, DRA), a cluster-scoped object someone else
creates (a PriorityClass, a RuntimeClass, a DeviceClass), or a device plugin on the nodes.
Each comes with the ``vf.yaml`` setting that does without it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

Obj = dict[str, Any]
_CORE_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
# what each delivery does with an object of a kind the cluster does not serve (ADR 0202)
_OPTIONAL = (
    "without it Argo CD applies everything else and fails only these objects, in the last "
    "sync wave (`SkipDryRunOnMissingResource=true`); Flux holds them in the Kustomization "
    "`-optional`, which alone is not Ready; the chart leaves them out; and"
)


def _pod_specs(objects: Sequence[Mapping[str, Any]]) -> Iterator[Obj]:
    for obj in objects:
        spec = obj.get("spec") or {}
        template = (spec.get("jobTemplate") or {}).get("spec", spec).get("template")
        if isinstance(template, dict):
            yield template.get("spec") or {}


def _device_resources(pods: Sequence[Obj]) -> list[str]:
    found = {
        name
        for pod in pods
        for container in pod.get("containers") or []
        for name in ((container.get("resources") or {}).get("limits") or {})
        if name not in _CORE_RESOURCES and not name.startswith("hugepages-")
    }
    return sorted(found)


def prerequisites(objects: Sequence[Mapping[str, Any]], *, env: str) -> list[str]:
    """Markdown list items: what the cluster of ``env`` must provide, and how not to."""
    kinds = {str(o.get("kind")) for o in objects}
    pods = list(_pod_specs(objects))
    items: list[str] = []
    scaled = sum(1 for o in objects if o.get("kind") == "ScaledObject")
    if scaled:
        items.append(
            f"KEDA (`keda.sh/v1alpha1` ScaledObject), which scales {scaled} worker(s). "
            f"Optional: {_OPTIONAL} the scaled Deployments run one replica. Without it: "
            f"`environments.{env}.autoscaling.enabled: false`."
        )
    if "ServiceMonitor" in kinds:
        items.append(
            "The Prometheus Operator (`monitoring.coreos.com/v1` ServiceMonitor), which has "
            f"Prometheus scrape the workers' `/metrics`. Optional: {_OPTIONAL} nothing "
            f"scrapes them. Without it: `environments.{env}.pods.metrics.service_monitor: false`."
        )
    if "ResourceClaimTemplate" in kinds:
        classes = sorted(
            {
                str(r["exactly"]["deviceClassName"])
                for o in objects
                if o.get("kind") == "ResourceClaimTemplate"
                for r in o["spec"]["spec"]["devices"]["requests"]
            }
        )
        named = ", ".join(f"`{c}`" for c in classes)
        items.append(
            "Dynamic Resource Allocation (`resource.k8s.io/v1` ResourceClaimTemplates, "
            f"Kubernetes 1.34 or later) and the DeviceClass {named} of a DRA driver. "
            f"Without them: set `environments.{env}.gpu.mode` to a mode other than `dra`."
        )
    devices = _device_resources(pods)
    if devices:
        named = ", ".join(f"`{d}`" for d in devices)
        items.append(
            f"A device plugin advertising {named} on GPU nodes (labelled "
            "`nvidia.com/gpu.present=true`). Without it: "
            f"`environments.{env}.gpu.mode: dra`, or no GPU grant."
        )
    runtimes = sorted({str(p["runtimeClassName"]) for p in pods if p.get("runtimeClassName")})
    for runtime in runtimes:
        items.append(
            f"The RuntimeClass `{runtime}` (the GPU container runtime). Without it: drop "
            f"`environments.{env}.gpu.runtime_class`."
        )
    created = {o["metadata"]["name"] for o in objects if o.get("kind") == "PriorityClass"}
    priorities = sorted({str(p["priorityClassName"]) for p in pods if p.get("priorityClassName")})
    for priority in priorities:
        if priority not in created:
            items.append(
                f"The PriorityClass `{priority}`. Without it: drop "
                f"`environments.{env}.priority_class`, or set `priority_class_value` so vf "
                "creates it."
            )
    return items
