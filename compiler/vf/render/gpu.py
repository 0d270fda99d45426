"""Render the plan's GPU decisions: pod fields, DRA claim templates and the MIG config."""

from __future__ import annotations

from vf.ir.gpu import DraClaim, GpuGrant, GpuPlan, MigNode
from vf.ir.plan import Plan
from vf.textio import yamlout
from vf.textio.objects import Obj

GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
CLAIM_NAME = "gpu"


def decorate_pod(pod: Obj, *, gpu: GpuPlan, grant: GpuGrant) -> None:
    """Add the grant's devices, placement and runtime class to a worker pod spec."""
    container = pod["containers"][0]
    resources = container.setdefault("resources", {})
    for name, count in grant.resources:
        resources.setdefault("limits", {})[name] = count
        resources.setdefault("requests", {})[name] = count
    if grant.claim_template is not None:
        pod["resourceClaims"] = [
            {"name": CLAIM_NAME, "resourceClaimTemplateName": grant.claim_template}
        ]
        resources["claims"] = [{"name": CLAIM_NAME}]
    else:
        pod["nodeSelector"] = {GPU_PRESENT_LABEL: "true"}
    pod["tolerations"] = [dict(GPU_TOLERATION)]
    if gpu.runtime_class is not None:
        pod["runtimeClassName"] = gpu.runtime_class
    if grant.hosts:
        term = {"key": "kubernetes.io/hostname", "operator": "In", "values": list(grant.hosts)}
        pod["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [term]}]
                }
            }
        }


def claim_templates(plan: Plan, gpu: GpuPlan) -> list[Obj]:
    """One ResourceClaimTemplate per DRA GPU workload: each pod gets its own claim."""
    return [_claim_template(plan, claim) for claim in gpu.claims]


def _claim_template(plan: Plan, claim: DraClaim) -> Obj:
    exactly: Obj = {
        "allocationMode": "ExactCount",
        "count": claim.count,
        "deviceClassName": claim.device_class,
    }
    if claim.selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in claim.selectors]
    if claim.capacity_memory is not None:
        exactly["capacity"] = {"requests": {"memory": claim.capacity_memory}}
    devices: Obj = {"requests": [{"name": CLAIM_NAME, "exactly": exactly}]}
    if claim.mps:
        parameters = {
            "apiVersion": "resource.nvidia.com/v1beta1",
            "kind": "GpuConfig",
            "sharing": {"strategy": "MPS"},
        }
        devices["config"] = [
            {
                "requests": [CLAIM_NAME],
                "opaque": {"driver": "gpu.nvidia.com", "parameters": parameters},
            }
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": claim.template,
            "namespace": plan.namespace,
            "labels": dict(plan.run_labels),
        },
        "spec": {"spec": {"devices": devices}},
    }


def mig_parted_configmap(plan: Plan, gpu: GpuPlan) -> Obj | None:
    """The nvidia-mig-parted config: one named config per MIG node, every card explicit."""
    if gpu.mig_configmap is None:
        return None
    configs = {node.config_name: _mig_entries(node) for node in gpu.mig_nodes}
    text = yamlout.dump({"version": "v1", "mig-configs": configs})
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": gpu.mig_configmap,
            "namespace": plan.namespace,
            "labels": dict(plan.run_labels),
        },
        "data": {"config.yaml": text},
    }


def _mig_entries(node: MigNode) -> list[Obj]:
    entries: list[Obj] = []
    for card in node.cards:
        if card.use == "mig":
            entries.append(
                {"devices": [card.index], "mig-enabled": True, "mig-devices": dict(card.devices)}
            )
        else:
            entries.append({"devices": [card.index], "mig-enabled": False})
    return entries
