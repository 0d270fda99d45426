"""What ``vf run-tree`` cannot emulate, named once at start for the objects at hand."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from vf.runtree.images import pod_template
from vf.textio.objects import Obj
from vf_runtime.labels import RUN_TREE_LABEL

if TYPE_CHECKING:
    from vf.runtree.podman_runtime import PodmanRuntime

_KINDS = {
    "NetworkPolicy": "NetworkPolicies are not enforced (every local process reaches every port)",
    "PodDisruptionBudget": "PodDisruptionBudgets (no node drains happen here)",
    "ScaledObject": "KEDA autoscaling (replicas stay as rendered)",
    "HorizontalPodAutoscaler": "autoscaling (replicas stay as rendered)",
    "ResourceClaimTemplate": "DRA resource claims (no devices are allocated)",
    "PersistentVolumeClaim": "storage classes and sizes (claims are local folders)",
    "PrometheusRule": "alerts: the PrometheusRule is not loaded (it is for a real Prometheus; "
    "the run writes only the scrape targets)",
}
_DASHBOARD = (
    "dashboards: the Grafana dashboard ConfigMap is not loaded (it is for a real Grafana; "
    "the run writes only the scrape targets)"
)
_DASHBOARD_LABEL = "grafana_dashboard"  # the label Grafana's dashboard sidecar loads by
_POD_FIELDS = {
    "nodeSelector": "scheduling: nodeSelector, affinity and tolerations (every pod runs here)",
    "affinity": "scheduling: nodeSelector, affinity and tolerations (every pod runs here)",
    "tolerations": "scheduling: nodeSelector, affinity and tolerations (every pod runs here)",
    "runtimeClassName": "runtime classes and GPUs (no device is given to any process)",
    "resourceClaims": "runtime classes and GPUs (no device is given to any process)",
}


def _pod_notes(template: Obj, *, containers: bool) -> Iterator[str]:
    spec = template.get("spec") or {}
    for name, note in _POD_FIELDS.items():
        if spec.get(name):
            yield note
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        if any("gpu" in k for part in resources.values() for k in (part or {})):
            yield "runtime classes and GPUs (no device is given to any process)"
        if (container.get("lifecycle") or {}).get("preStop"):
            yield "preStop hooks (a stopping pod's containers get SIGTERM at once)"
        if resources and not containers:
            yield "resource requests and limits (not enforced)"
        elif (resources.get("requests") or {}).get("memory"):
            yield "memory requests (a scheduling input; limits and CPU shares are applied)"
    for volume in spec.get("volumes") or []:
        if "hostPath" in volume:
            yield "hostPath volumes (each is an empty local folder, not the node's files)"


def not_emulated(objects: Sequence[Obj], *, containers: bool = False) -> list[str]:
    """One line per thing in these objects that runs differently here, in a stable order.
    ``containers``: the worker image's containers run in podman (``--runtime podman``)."""
    notes: set[str] = (
        {
            "image pulls (the worker image is built from --app into podman's local storage)",
            "the broker and store pods run as local processes: their security contexts, "
            "limits and mount namespaces are not applied",
        }
        if containers
        else {
            "security contexts (runAsUser, read-only root filesystem) and image pulls",
            "mount namespaces (mount paths are translated in env, args and mounted files)",
        }
    )
    for obj in objects:
        if obj.get("kind") in _KINDS:
            notes.add(_KINDS[str(obj["kind"])])
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if obj.get("kind") == "ConfigMap" and _DASHBOARD_LABEL in labels:
            notes.add(_DASHBOARD)
        template = pod_template(obj)
        if template is not None:
            notes.update(_pod_notes(template, containers=containers))
        if obj.get("kind") == "StatefulSet" and obj.get("spec", {}).get("volumeClaimTemplates"):
            notes.add(_KINDS["PersistentVolumeClaim"])
    return sorted(notes)


def runtime_notice(oci: PodmanRuntime | None, notes: Sequence[str]) -> list[str]:
    """The run's opening lines: which runtime runs the pods, then what it cannot emulate."""
    if oci is None:
        head = "runtime: process (every container is a local process in the worker environment)"
    else:
        images = ", ".join(sorted(oci.images)) or "none"
        head = (
            f"runtime: podman (worker and provision containers run from {images}; "
            f"containers labelled {RUN_TREE_LABEL}={oci.run_id})"
        )
    return [head, *(f"not emulated: {line}" for line in notes)]
