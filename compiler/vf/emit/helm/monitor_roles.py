"""The values of the chart's monitoring and PriorityClass role templates (ADR 237), built
from one environment's plan.

``monitoring`` holds what ``pods.metrics.service_monitor`` and ``observability:`` ask for
(``templates/helm/roles/monitoring.yaml``): the metrics Service and its ServiceMonitor,
the PrometheusRule of the flow's alerts, the Grafana dashboard's ConfigMap. The rules and
the dashboard are the plan's (``vf.render.observe``): they select the environment's
namespace. ``priorityClass`` is the PriorityClass vf creates (``priorityclass.yaml``),
named by ``priorityClassName``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from vf import names
from vf.ir.plan import Plan
from vf.ir.records import Observability, PodOptions
from vf.render.observe import alert_rules, dashboard_configmap
from vf.render.pods import priority_class
from vf.textio.objects import Obj
from vf_runtime.labels import FLOW_LABEL

MONITORING, PRIORITY_CLASS = "monitoring", "priorityClass"


def monitor_values(plan: Plan) -> Obj:
    pods = plan.pods or PodOptions()
    options = plan.observability or Observability()
    monitoring: Obj = {}
    if pods.service_monitor:
        flow = dict(plan.flow_labels)[FLOW_LABEL]
        monitoring["serviceMonitor"] = {"name": names.k8s_name("vf", flow, "metrics")}
    if options.alerts:
        name = names.k8s_name("vf", plan.flow_id, "alerts")
        monitoring["alerts"] = {"name": name, "rules": alert_rules(plan, options)}
    if options.dashboard:
        configmap = dashboard_configmap(plan)
        ((file, text),) = configmap["data"].items()
        monitoring["dashboard"] = {
            "name": configmap["metadata"]["name"],
            "file": file,
            "json": text,
        }
    out: Obj = {MONITORING: monitoring}
    created = priority_class(plan.priority_class, options=pods)
    if created:
        out[PRIORITY_CLASS] = {"value": created[0]["value"]}
    return out


def monitor_objects(values: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """The kind and name of each object the templates render from one environment's values
    (where the cluster serves the Prometheus Operator's API)."""
    monitoring = values.get(MONITORING) or {}
    if "serviceMonitor" in monitoring:
        yield "Service", monitoring["serviceMonitor"]["name"]
        yield "ServiceMonitor", monitoring["serviceMonitor"]["name"]
    for key, kind in (("alerts", "PrometheusRule"), ("dashboard", "ConfigMap")):
        if key in monitoring:
            yield kind, monitoring[key]["name"]
    if values.get(PRIORITY_CLASS):
        yield "PriorityClass", str(values.get("priorityClassName"))
