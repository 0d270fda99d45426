"""The chart's hand-written role templates: one template per object role, the same bytes in
every flow's chart, ranging over a values section built from the Plan (ADR 229).

``FAMILIES`` lists them: this module's, a worker's KEDA ScaledObject (``autoscaling.<node>``)
and a long-running worker's PodDisruptionBudget (``podDisruptionBudgets.<node>``, rendered
where ``nodes.<node>.replicas`` is above one), whose files include the workers' own
templates (their values are ``vf.emit.helm.workers``', ADR 235, 241); the flow-wide roles
(``vf.emit.helm.flow_roles``, ADR 236); the broker and the store
(``vf.emit.helm.infra_roles``) and what watches the flow with the PriorityClass
(``vf.emit.helm.monitor_roles``), ADR 237; the provision Job with the topology
(``vf.emit.helm.provision_roles``, ADR 243). ``vf.emit.helm.chart`` assembles the chart
from them (ADR 245).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from vf.emit.helm.flow_roles import FLOW_ROLES
from vf.emit.helm.infra_roles import INFRA_ROLES
from vf.emit.helm.monitor_roles import MONITOR_ROLES
from vf.emit.helm.provision_roles import PROVISION_ROLES
from vf.emit.helm.shapes import Family, in_release
from vf.ir.plan import Plan, Scaler, Workload
from vf.ir.records import PodOptions
from vf.plan.planner import budget_name
from vf.render.autoscale import hpa_behavior
from vf.resources import resource_dir
from vf.textio.objects import Obj
from vf_runtime.labels import COMPONENT, INSTANCE, MANAGED_BY, NODE_LABEL, OPTIONAL_LABEL
from vf_runtime.labels import NAME as NAME_LABEL

AUTOSCALING = "autoscaling"
BUDGETS = "podDisruptionBudgets"
_LONG_RUNNING = frozenset({"Deployment", "StatefulSet"})
_WORKLOADS = ("Deployment", "Job", "StatefulSet")


def _owns(obj: Obj) -> bool:
    """Every ScaledObject, and a worker's budget and workload."""
    kind = obj.get("kind")
    worker = NODE_LABEL in (obj["metadata"].get("labels") or {})
    return kind == "ScaledObject" or (kind in ("PodDisruptionBudget", *_WORKLOADS) and worker)


def _values(plan: Plan) -> Obj:
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
    }


def _objects(values: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for kind, section in (("ScaledObject", AUTOSCALING), ("PodDisruptionBudget", BUDGETS)):
        for node in values.get(section) or {}:
            yield kind, node


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
        NAME_LABEL: label,
        NODE_LABEL: label,
    }
    if derived != labels:  # labels of another shape: written out whole
        return {"name": name, "labels": dict(sorted(labels.items()))}
    return out


def _scaler(plan: Plan, scaler: Scaler, *, flow: Obj) -> Obj:
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
            # KEDA reaches vf's broker in the release's namespace
            "monitoringEndpoint": in_release(plan.namespace, scaler.endpoint),
            "triggers": [{"stream": t.stream, "consumer": t.consumer} for t in scaler.triggers],
        }
    )
    if scaler.behavior is not None:
        entry["behavior"] = hpa_behavior(scaler.behavior)
    return entry


SCALING_ROLES = Family(
    files=(
        "scaledobject.yaml",
        "poddisruptionbudget.yaml",
        "worker-deployment.yaml",  # a worker's (ADR 235)
        "worker-job.yaml",  # a worker's (ADR 241)
        "worker-statefulset.yaml",  # a partitioned worker's (ADR 241)
    ),
    sections=("commonLabels", "commonAnnotations", AUTOSCALING, BUDGETS),
    owns=_owns,
    values=_values,
    objects=_objects,
)
FAMILIES = (SCALING_ROLES, FLOW_ROLES, INFRA_ROLES, MONITOR_ROLES, PROVISION_ROLES)


def is_role_object(obj: Obj) -> bool:
    """An object a role template renders (the chart renders no other, ADR 245)."""
    return any(family.owns(obj) for family in FAMILIES)


def role_values(plan: Plan) -> Obj:
    """The values sections of the role templates for one environment, from its plan."""
    return {key: value for family in FAMILIES for key, value in family.values(plan).items()}


def shipped_templates() -> dict[str, str]:
    """The chart files vf ships as they are, by their path in the chart, the same bytes in
    every flow's chart: each role's template (``templates/<file>``) and the files of
    ``templates/helm/chart/`` (the helpers, the environment check, the notes and
    ``helm test``'s Pod)."""
    helm = resource_dir("templates") / "helm"
    roles = {
        f"templates/{name}": helm / "roles" / name
        for name in sorted(name for family in FAMILIES for name in family.files)
    }
    chart = helm / "chart"
    files = {p.relative_to(chart).as_posix(): p for p in chart.rglob("*") if p.is_file()}
    return {
        path: source.read_text(encoding="utf-8").replace("\r\n", "\n")
        for path, source in sorted({**roles, **files}.items())
    }


def role_kinds(roles: Mapping[str, Obj]) -> Counter[str]:
    """How many objects of each role kind the chart holds (in any environment)."""
    found = {
        (index, kind, key)
        for values in roles.values()
        for index, family in enumerate(FAMILIES)
        for kind, key in family.objects(values)
    }
    return Counter(kind for _, kind, _ in found)


def neutral_roles() -> Obj:
    """The sections in ``values.yaml``, which holds no environment's values."""
    return {section: {} for family in FAMILIES for section in family.sections}
