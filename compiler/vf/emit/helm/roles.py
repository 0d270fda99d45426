"""The chart's roles (ADR 245, 257): each role module's values builder and object lister,
which overlay objects a role template renders, the shipped templates; and the values of
the ScaledObjects (``autoscaling``) and the PodDisruptionBudgets (``podDisruptionBudgets``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from vf.emit.helm.flow_roles import flow_objects, flow_values
from vf.emit.helm.infra_roles import infra_objects, infra_values, monitor_objects, monitor_values
from vf.emit.helm.provision_roles import provision_objects, provision_values
from vf.emit.helm.shapes import entry, in_release, worker_entry
from vf.emit.helm.workers import worker_objects, worker_values
from vf.ir.plan import Plan, Scaler
from vf.ir.records import PodOptions
from vf.plan.planner import budget_name
from vf.render.autoscale import hpa_behavior
from vf.render.observe import DASHBOARD_LABEL
from vf.resources import resource_dir
from vf.textio.objects import Obj
from vf_runtime.labels import (
    BROKER_CONFIG,
    COMPONENT,
    INFRA_LABEL,
    MANAGED_BY,
    METRICS_LABEL,
    NODE_LABEL,
    PROVISION,
    REPLICA_COUNTS,
    labels_of,
)

AUTOSCALING = "autoscaling"
BUDGETS = "podDisruptionBudgets"
# the sections values.yaml holds empty (it holds no environment's values, ADR 188)
SECTIONS = (
    *("commonLabels", "commonAnnotations", AUTOSCALING, BUDGETS, "resourceClaimTemplates"),
    *("networkPolicies", "brokerConfig", "migParted", "infra", "monitoring"),
    *("provision", "topology"),
)
# the kinds of the overlays' objects of each role, whatever their labels
_ANY = frozenset(
    {"NetworkPolicy", "PriorityClass", "PrometheusRule", "ResourceClaimTemplate"}
    | {"ScaledObject", "ServiceMonitor"}
)
_WORKER_KINDS = frozenset({"Deployment", "Job", "PodDisruptionBudget", "StatefulSet"})
_CONFIG_COMPONENTS = frozenset({BROKER_CONFIG, PROVISION, REPLICA_COUNTS})


def scaling_values(plan: Plan) -> Obj:
    pods = plan.pods or PodOptions()
    labels = dict(plan.run_labels)
    labels.pop(MANAGED_BY, None)  # Helm's is the release's
    flow = {"id": plan.flow_id, "run": plan.run_id, "labels": dict(sorted(labels.items()))}
    scalers = {s.node: _scaler(plan, s, flow=flow) for s in plan.autoscaling or ()}
    budgets = {  # a long-running worker's, named as a count above one names it
        w.node: worker_entry(w.node, dict(w.labels), flow=flow, name=name, suffix="-pdb")
        for w in plan.workloads
        if w.kind in ("Deployment", "StatefulSet")
        and (name := w.pdb or budget_name(plan.flow_id, plan.run_id, w.node))
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


def _scaler(plan: Plan, scaler: Scaler, *, flow: Obj) -> Obj:
    labels, behavior = dict(scaler.labels), scaler.behavior
    return worker_entry(scaler.node, labels, flow=flow, name=scaler.deployment, suffix="") | entry(
        minReplicas=scaler.min_replicas,
        maxReplicas=scaler.max_replicas,
        pollingInterval=scaler.polling_interval,
        cooldownPeriod=scaler.cooldown,
        lagThreshold=scaler.lag_threshold,
        account=scaler.account,
        # KEDA reaches vf's broker in the release's namespace
        monitoringEndpoint=in_release(plan.namespace, scaler.endpoint),
        triggers=[{"stream": t.stream, "consumer": t.consumer} for t in scaler.triggers],
        behavior=hpa_behavior(behavior) if behavior is not None else None,
    )


def role_values(plan: Plan) -> Obj:
    """The values sections of the role templates for one environment, from its plan."""
    makers = (scaling_values, flow_values, infra_values, monitor_values, provision_values)
    out = {key: value for values in makers for key, value in values(plan).items()}
    return out | worker_values(plan, flow=out["flow"])


def is_role_object(obj: Obj) -> bool:
    """An object a role template renders (the chart renders no other, ADR 245): a
    worker's, a service's (but for the Namespace), the flow's ConfigMaps (the broker's, the
    topology, the replica counts, the dashboard, nvidia-mig-parted's ``config.yaml``), the
    metrics Service, and every object of a kind only a role renders."""
    kind, labels = obj.get("kind"), labels_of(obj)
    if kind in _ANY or (INFRA_LABEL in labels and kind != "Namespace"):
        return True
    if kind == "ConfigMap":
        mig = set(obj.get("data") or ()) == {"config.yaml"} and COMPONENT not in labels
        return labels.get(COMPONENT) in _CONFIG_COMPONENTS or DASHBOARD_LABEL in labels or mig
    if kind == "Service":  # the metrics Service, or a partitioned worker's headless one
        headless = NODE_LABEL in labels and "clusterIP" in (obj.get("spec") or {})
        return METRICS_LABEL in labels or headless
    worker = kind in _WORKER_KINDS and NODE_LABEL in labels
    return worker or (kind == "Job" and labels.get(COMPONENT) == PROVISION)


def shipped_templates() -> dict[str, str]:
    """The chart files vf ships as they are (ADR 255), by their path in the chart: each
    role's template (``templates/<file>``) and the files of ``templates/helm/chart/``."""
    helm = resource_dir("templates") / "helm"
    files = {f"templates/{p.name}": p for p in (helm / "roles").glob("*.yaml")}
    chart = helm / "chart"
    files.update({p.relative_to(chart).as_posix(): p for p in chart.rglob("*") if p.is_file()})
    return {
        p: f.read_text(encoding="utf-8").replace("\r\n", "\n") for p, f in sorted(files.items())
    }


def _scaling_objects(values: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for kind, section in (("ScaledObject", AUTOSCALING), ("PodDisruptionBudget", BUDGETS)):
        for node in values.get(section) or {}:
            yield kind, node


def role_kinds(roles: Mapping[str, Obj]) -> Counter[str]:
    """How many objects of each kind the chart renders in any environment: each lister
    keys an object alike in every environment (a node, a service, a section)."""
    listers = (worker_objects, _scaling_objects, flow_objects, infra_objects, monitor_objects)
    found = {
        (index, kind, key)
        for values in roles.values()
        for index, objects in enumerate((*listers, provision_objects))
        for kind, key in objects(values)
    }
    return Counter(kind for _, kind, _ in found)
