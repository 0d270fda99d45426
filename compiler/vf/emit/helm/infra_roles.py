"""The values of the chart's broker, store, monitoring and PriorityClass role templates
(ADR 237), built from one environment's plan.

``infra.nats`` and ``infra.redis`` describe the broker and the payload store the
environment runs (``templates/helm/roles/nats.yaml``, ``redis.yaml``): their profile,
name, image, resources, storage, and the Secrets of their credentials and certificate.
Neither is there where the service is external (or there is no store). ``monitoring``
holds what ``pods.metrics.service_monitor`` and ``observability:`` ask for
(``monitoring.yaml``): the metrics Service and its ServiceMonitor, the PrometheusRule of the
flow's alerts, the Grafana dashboard's ConfigMap, the plan's (``vf.render.observe``) that
select the environment's namespace. ``priorityClass`` is the PriorityClass vf creates
(``priorityclass.yaml``), named by ``priorityClassName``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from vf import names
from vf.emit.helm.shapes import entry
from vf.ir.plan import Infra, Plan, ServiceAuth, ServiceTls
from vf.ir.records import Observability, PodOptions
from vf.render.infra import DEV_FILE_STORE, file_store_limit
from vf.render.observe import alert_rules, dashboard_configmap
from vf.render.pods import priority_class
from vf.resources import shipped_components
from vf.textio.objects import Obj
from vf_runtime.credentials import store_acl_rule
from vf_runtime.labels import FLOW_LABEL

INFRA = "infra"
MONITORING, PRIORITY_CLASS = "monitoring", "priorityClass"


def infra_values(plan: Plan) -> Obj:
    infra = plan.infra
    services: Obj = {}
    if infra.broker_profile in ("dev", "durable"):
        services["nats"] = _broker(infra)
    if infra.store_profile in ("dev", "durable", "cache"):
        services["redis"] = _store(infra, flow_id=plan.flow_id)
    return {INFRA: services}


def infra_objects(values: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """The kind and name of each object the templates render from one environment's values."""
    services = values.get(INFRA) or {}
    nats, redis = services.get("nats"), services.get("redis")
    if nats:
        durable = nats["profile"] == "durable"
        yield "ConfigMap", f"{nats['name']}-config"
        yield ("StatefulSet" if durable else "Deployment"), nats["name"]
        yield "Service", nats["name"]
        if durable:
            yield "Service", f"{nats['name']}-headless"
            yield "PodDisruptionBudget", nats["name"]
    if redis:
        yield "Deployment", redis["name"]
        yield "Service", redis["name"]
        if redis["profile"] == "durable":
            yield "PersistentVolumeClaim", f"{redis['name']}-data"


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


def _resources(component: str) -> Obj:
    """The shipped container's requests and limits (the same in every environment)."""
    (workload,) = (
        o for o in shipped_components()[component] if o["kind"] in ("Deployment", "StatefulSet")
    )
    resources: Obj = workload["spec"]["template"]["spec"]["containers"][0]["resources"]
    return {k: dict(v) for k, v in sorted(resources.items())}


def _broker(infra: Infra) -> Obj:
    durable = infra.broker_profile == "durable"
    size = infra.broker_storage_size
    return entry(
        profile=infra.broker_profile,
        name=infra.broker_name,
        image=infra.broker_image,
        resources=_resources(f"nats-{infra.broker_profile}"),
        maxFileStore=file_store_limit(size) if durable else DEV_FILE_STORE,
        replicas=infra.broker_replicas if durable else None,
        storage=entry(size=size, className=infra.broker_storage_class) if durable else None,
        auth=_auth(infra.broker_auth),
        tls=_tls(infra.broker_tls),
    )


def _store(infra: Infra, *, flow_id: str) -> Obj:
    durable = infra.store_profile == "durable"
    size = infra.store_storage_size
    auth = _auth(infra.store_auth)
    if auth is not None:
        # the flow's user may reach the flow's keys and the commands its workers send
        auth["acl"] = " ".join(store_acl_rule(flow_id).split())
    return entry(
        profile=infra.store_profile,
        name=infra.store_name,
        image=infra.store_image,
        resources=_resources(f"redis-{infra.store_profile}"),
        storage=entry(size=size, className=infra.store_storage_class) if durable else None,
        auth=auth,
        tls=_tls(infra.store_tls),
    )


def _auth(auth: ServiceAuth | None) -> Obj | None:
    if auth is None or auth.secret is None:
        return None
    return entry(secret=auth.secret, routesSecret=auth.routes_secret)


def _tls(tls: ServiceTls | None) -> Obj | None:
    return {"secret": tls.secret} if tls is not None else None
