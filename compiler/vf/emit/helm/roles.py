"""The chart's hand-written role templates: one template per object role, the same bytes in
every flow's chart, ranging over a values section built from the Plan (ADR 229).

The roles: a worker's KEDA ScaledObject (``autoscaling.<node>``) and a long-running
worker's PodDisruptionBudget (``podDisruptionBudgets.<node>``, rendered where
``nodes.<node>.replicas`` is above one); the flow-wide roles of ``vf.emit.helm.flow_roles``
(ADR 236); the broker and the store (``infra``, ``vf.emit.helm.infra_roles``), what watches
the flow and the PriorityClass (``monitoring``, ``priorityClass``,
``vf.emit.helm.monitor_roles``), ADR 237; the workers' own workloads
(``vf.emit.helm.workers``, ADR 235, 241) and the provision Job with the topology
(``vf.emit.helm.provision_roles``, ADR 243). ``vf.emit.helm.chart`` assembles the chart
from them (ADR 245).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vf.emit.helm.flow_roles import (
    FLOW_ROLE_FILES,
    flow_role_names,
    flow_role_schemas,
    flow_role_values,
    is_flow_role_object,
    neutral_flow_roles,
)
from vf.emit.helm.infra_roles import (
    INFRA_FILES,
    infra_kinds,
    infra_schemas,
    infra_values,
    is_infra_object,
    neutral_infra,
)
from vf.emit.helm.monitor_roles import (
    MONITOR_FILES,
    is_monitor_object,
    monitor_kinds,
    monitor_schemas,
    monitor_values,
    neutral_monitor,
)
from vf.emit.helm.provision_roles import (
    PROVISION_FILE,
    is_provision_object,
    neutral_provision,
    provision_kinds,
    provision_schemas,
    provision_values,
)
from vf.ir.plan import Plan, Scaler, Workload
from vf.ir.records import PodOptions
from vf.plan.planner import budget_name
from vf.render.autoscale import hpa_behavior
from vf.resources import resource_dir
from vf.textio.objects import Obj
from vf_runtime.labels import COMPONENT, INSTANCE, MANAGED_BY, NAME, NODE_LABEL, OPTIONAL_LABEL

AUTOSCALING = "autoscaling"
BUDGETS = "podDisruptionBudgets"
# the role's kind → its template (templates/helm/roles/<file>, shipped as it is)
ROLE_FILES = {
    "ScaledObject": "scaledobject.yaml",
    "PodDisruptionBudget": "poddisruptionbudget.yaml",
    "Deployment": "worker-deployment.yaml",  # a worker's (ADR 235)
    **FLOW_ROLE_FILES,  # the flow-wide roles (ADR 236)
    "Job": "worker-job.yaml",  # a worker's (ADR 241)
    "StatefulSet": "worker-statefulset.yaml",  # a partitioned worker's (ADR 241)
}
_SECTIONS = {"ScaledObject": AUTOSCALING, "PodDisruptionBudget": BUDGETS}
_LONG_RUNNING = frozenset({"Deployment", "StatefulSet"})
_WORKLOADS = ("Deployment", "Job", "StatefulSet")
# a monitoring endpoint in the environment's namespace names the release's: the template
# puts the release's namespace in place of this text (a plain replace, nothing evaluated)
RELEASE_NAMESPACE = "{{ .Release.Namespace }}"


def is_role_object(obj: Obj) -> bool:
    """An object a role template renders (the chart renders no other, ADR 245): every
    ScaledObject, a worker's budget, the flow-wide roles' objects (``vf.emit.helm.flow_roles``)
    and the broker's and the store's objects (ADR 237)."""
    if is_infra_object(obj) or is_monitor_object(obj) or is_provision_object(obj):
        return True
    kind = obj.get("kind")
    if kind == "ScaledObject" or is_flow_role_object(obj):
        return True
    worker = NODE_LABEL in (obj["metadata"].get("labels") or {})
    return kind in ("PodDisruptionBudget", *_WORKLOADS) and worker


def role_values(plan: Plan) -> Obj:
    """The values sections of the role templates for one environment, from its plan."""
    pods = plan.pods or PodOptions()
    labels = dict(plan.run_labels)
    labels.pop(MANAGED_BY, None)  # Helm's is the release's
    flow = {"id": plan.flow_id, "run": plan.run_id, "labels": dict(sorted(labels.items()))}
    scalers = {s.node: _scaler(plan, s, flow=flow) for s in plan.autoscaling or ()}
    budgets = {
        w.node: worker_entry(
            w.node, dict(w.labels), flow=flow, name=_budget_name(plan, w), suffix="-pdb"
        )
        for w in plan.workloads
        if w.kind in _LONG_RUNNING
    }
    return {
        "flow": flow,
        # vf.yaml's pods.labels and pods.annotations, on the budgets; the ScaledObjects come
        # after the pod options in a render (vf.render.objects) and carry vf's labels only
        "commonLabels": dict(sorted(pods.labels)),
        "commonAnnotations": dict(sorted(pods.annotations)),
        AUTOSCALING: dict(sorted(scalers.items())),
        BUDGETS: dict(sorted(budgets.items())),
        **flow_role_values(plan),
        **infra_values(plan),
        **monitor_values(plan),
        **provision_values(plan),
    }


def _budget_name(plan: Plan, workload: Workload) -> str:
    return workload.pdb or budget_name(plan.flow_id, plan.run_id, workload.node)


def worker_entry(node: str, labels: dict[str, str], *, flow: Obj, name: str, suffix: str) -> Obj:
    """A worker's entry: its component, and its object's name, instance label and node
    label only where they are not what ``vf.workerName`` and ``vf.workerLabels`` derive
    from the node's name (a name vf shortened, ADR 209), so an entry is a few bytes."""
    labels.pop(MANAGED_BY, None)
    labels.pop(OPTIONAL_LABEL, None)  # the ScaledObject's template adds it
    head = f"{flow['id']}-{flow['run']}-{node}"
    out: Obj = {"component": labels.get(COMPONENT)}
    if name != f"vf-{head}{suffix}":
        out["name"] = name
    label = labels.get(NODE_LABEL, "")
    if label != node:
        out["label"] = label
    if labels.get(INSTANCE) != head:
        out["instance"] = labels.get(INSTANCE)
    derived = {
        **flow["labels"],
        COMPONENT: out["component"],
        INSTANCE: out.get("instance", head),
        NAME: label,
        NODE_LABEL: label,
    }
    if derived != labels:  # labels of another shape: written out whole
        return {"name": name, "labels": dict(sorted(labels.items()))}
    return out


def _scaler(plan: Plan, scaler: Scaler, *, flow: Obj) -> Obj:
    endpoint = scaler.endpoint
    own = f".{plan.namespace}.svc"
    if own in endpoint:  # KEDA reaches vf's broker in the release's namespace
        endpoint = endpoint.replace(own, f".{RELEASE_NAMESPACE}.svc")
    entry = worker_entry(
        scaler.node, dict(scaler.labels), flow=flow, name=scaler.deployment, suffix=""
    )
    entry.update(
        {
            "minReplicas": scaler.min_replicas,
            "maxReplicas": scaler.max_replicas,
            "pollingInterval": scaler.polling_interval,
            "cooldownPeriod": scaler.cooldown,
            "lagThreshold": scaler.lag_threshold,
            "account": scaler.account,
            "monitoringEndpoint": endpoint,
            "triggers": [{"stream": t.stream, "consumer": t.consumer} for t in scaler.triggers],
        }
    )
    if scaler.behavior is not None:
        entry["behavior"] = hpa_behavior(scaler.behavior)
    return entry


def role_templates() -> dict[str, str]:
    """Each role's template file of the chart (``templates/<file>``) and its text."""
    folder = resource_dir("templates") / "helm" / "roles"
    return {
        f"templates/{name}": (folder / name).read_text(encoding="utf-8").replace("\r\n", "\n")
        for name in sorted({*ROLE_FILES.values(), *INFRA_FILES, *MONITOR_FILES, PROVISION_FILE})
    }


def role_kinds(roles: Mapping[str, Obj]) -> dict[str, int]:
    """How many objects of each role kind the chart holds (in any environment)."""
    counts = {
        kind: len({node for values in roles.values() for node in values.get(section) or {}})
        for kind, section in _SECTIONS.items()
    }
    found = {**counts, **{kind: len(n) for kind, n in flow_role_names(roles).items()}}
    extra = infra_kinds(roles) + monitor_kinds(roles) + provision_kinds(roles)
    for kind, count in extra.items():
        found[kind] = found.get(kind, 0) + count
    return found


def neutral_roles() -> Obj:
    """The sections in ``values.yaml``, which holds no environment's values."""
    return {
        "commonLabels": {},
        "commonAnnotations": {},
        AUTOSCALING: {},
        BUDGETS: {},
        **neutral_flow_roles(),
        **neutral_infra(),
        **neutral_monitor(),
        **neutral_provision(),
    }


_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
_NAME = {"type": "string", "minLength": 1}
_INT = {"type": "integer", "minimum": 0}
# a worker's entry: how its object's name and labels differ from what the helpers derive
_WORKER = {
    "component": {"type": "string", "description": f"The worker's {COMPONENT} label."},
    "name": _NAME,
    "label": _NAME,
    "instance": _NAME,
    "labels": _LABELS,
}
_SCALER = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "minReplicas",
        "maxReplicas",
        "pollingInterval",
        "cooldownPeriod",
        "lagThreshold",
        "account",
        "monitoringEndpoint",
        "triggers",
    ],
    "properties": {
        **_WORKER,
        "minReplicas": _INT,
        "maxReplicas": {"type": "integer", "minimum": 1},
        "pollingInterval": {"type": "integer", "minimum": 1},
        "cooldownPeriod": _INT,
        "lagThreshold": {"type": "integer", "minimum": 1},
        "account": {"type": "string"},
        "monitoringEndpoint": _NAME,
        "triggers": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["stream", "consumer"],
                "properties": {"stream": _NAME, "consumer": _NAME},
            },
        },
        "behavior": {"type": "object"},
    },
}
_BUDGET = {"type": "object", "additionalProperties": False, "properties": _WORKER}


NODE_NAMES_REF = "#/definitions/nodeName"


def node_names(nodes: Sequence[str]) -> Obj:
    """The schema's definitions: the flow's node names, once (each section refers to them)."""
    return {"nodeName": {"enum": sorted(nodes)}} if nodes else {}


def keyed_by_node(nodes: Sequence[str]) -> Obj:
    """What makes a section's schema take entries of the flow's nodes only."""
    # (an enum may not be empty: a chart of no nodes takes no entry)
    return {"propertyNames": {"$ref": NODE_NAMES_REF}} if nodes else {"maxProperties": 0}


def role_schemas(nodes: Sequence[str]) -> dict[str, Any]:
    """The schemas of the role sections: entries only for the flow's nodes (the same names
    in every environment, so one environment's change leaves the schema alone)."""
    names = keyed_by_node(nodes)
    return {
        "flow": {
            "type": "object",
            "additionalProperties": False,
            "required": ["id", "run", "labels"],
            "properties": {"id": _NAME, "run": _NAME, "labels": _LABELS},
            "description": "The flow's id and run id, and the labels of its every object "
            "(from the plan; recompile to change).",
        },
        "commonLabels": {
            **_LABELS,
            "description": "vf.yaml's pods.labels, on the objects of the role templates "
            "but the ScaledObjects; vf's own keys win.",
        },
        "commonAnnotations": {
            **_LABELS,
            "description": "vf.yaml's pods.annotations, where commonLabels go.",
        },
        AUTOSCALING: {
            "type": "object",
            **names,
            "additionalProperties": _SCALER,
            "description": "KEDA ScaledObjects by node (from the plan): bounds, lag threshold "
            "and the streams each scales on. Rendered only where the cluster serves KEDA.",
        },
        BUDGETS: {
            "type": "object",
            **names,
            "additionalProperties": _BUDGET,
            "description": "PodDisruptionBudgets of the long-running workers (from the plan), "
            "rendered where nodes.<node>.replicas is above one.",
        },
        **flow_role_schemas(names),
        **infra_schemas(),
        **monitor_schemas(),
        **provision_schemas(),
    }
