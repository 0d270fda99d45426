"""The values of the broker's, the store's, the monitoring and the PriorityClass role
templates (ADR 237) from one environment's plan: ``infra.nats`` and ``infra.redis`` where
vf runs them, ``monitoring`` as ``pods.metrics`` and ``observability:`` ask, and
``priorityClass`` where vf creates the one ``priorityClassName`` names.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from vf import names
from vf.emit.helm.shapes import entry
from vf.ir.plan import Plan, ServiceAuth, ServiceTls
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
    infra, services = plan.infra, {}
    if infra.broker_profile in ("dev", "durable"):
        durable = infra.broker_profile == "durable"
        services["nats"] = _service(
            "nats",
            profile=infra.broker_profile,
            name=infra.broker_name,
            ref=infra.broker_image,
            auth=infra.broker_auth,
            tls=infra.broker_tls,
            storage=(infra.broker_storage_size, infra.broker_storage_class),
        ) | entry(
            maxFileStore=file_store_limit(infra.broker_storage_size) if durable else DEV_FILE_STORE,
            replicas=infra.broker_replicas if durable else None,
        )
    if infra.store_profile in ("dev", "durable", "cache"):
        services["redis"] = _service(
            "redis",
            profile=infra.store_profile,
            name=infra.store_name,
            ref=infra.store_image,
            auth=infra.store_auth,
            tls=infra.store_tls,
            storage=(infra.store_storage_size, infra.store_storage_class),
        )
        if "auth" in services["redis"]:
            # the flow's user may reach the flow's keys and the commands its workers send
            services["redis"]["auth"]["acl"] = " ".join(store_acl_rule(plan.flow_id).split())
    return {INFRA: services}


def infra_objects(values: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """The kind and name of each object the templates render from one environment's values."""
    services = values.get(INFRA) or {}
    nats, redis = services.get("nats"), services.get("redis")
    if nats:
        name, durable = nats["name"], nats["profile"] == "durable"
        yield from (("ConfigMap", f"{name}-config"), ("Service", name))
        yield ("StatefulSet" if durable else "Deployment"), name
        if durable:
            yield from (("Service", f"{name}-headless"), ("PodDisruptionBudget", name))
    if redis:
        yield from (("Deployment", redis["name"]), ("Service", redis["name"]))
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
        ((file, text),), name = configmap["data"].items(), configmap["metadata"]["name"]
        monitoring["dashboard"] = {"name": name, "file": file, "json": text}
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


def _service(
    image: str,
    *,
    profile: str,
    name: str,
    ref: str,
    auth: ServiceAuth | None,
    tls: ServiceTls | None,
    storage: tuple[str, str | None],
) -> Obj:
    """The keys ``infra.nats`` and ``infra.redis`` share; ``storage``: size and class."""
    shipped = shipped_components()[f"{image}-{profile}"]  # the container's requests, limits
    (workload,) = (o for o in shipped if o["kind"] in ("Deployment", "StatefulSet"))
    resources = workload["spec"]["template"]["spec"]["containers"][0]["resources"]
    size, class_name = storage
    secret = auth.secret if auth is not None else None
    return entry(
        profile=profile,
        name=name,
        image=ref,
        resources={k: dict(v) for k, v in sorted(resources.items())},
        storage=entry(size=size, className=class_name) if profile == "durable" else None,
        auth=entry(secret=secret, routesSecret=auth.routes_secret) if auth and secret else None,
        tls={"secret": tls.secret} if tls is not None else None,
    )
