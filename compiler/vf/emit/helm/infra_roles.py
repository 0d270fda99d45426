"""The values of the chart's broker and store role templates (ADR 237), built from one
environment's plan.

``infra.nats`` and ``infra.redis`` describe the broker and the payload store the
environment runs (``templates/helm/roles/nats.yaml``, ``redis.yaml``): their profile,
name, image, resources, storage, and the Secrets of their credentials and certificate.
Neither is there where the service is external (or there is no store).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from vf.emit.helm.shapes import entry
from vf.ir.plan import Infra, Plan, ServiceAuth, ServiceTls
from vf.render.infra import DEV_FILE_STORE, file_store_limit
from vf.resources import shipped_components
from vf.textio.objects import Obj
from vf_runtime.credentials import store_acl_rule

INFRA = "infra"


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
