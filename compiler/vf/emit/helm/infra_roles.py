"""The values of the chart's broker and store role templates (ADR 237), built from one
environment's plan.

``infra.nats`` and ``infra.redis`` describe the broker and the payload store the
environment runs (``templates/helm/roles/nats.yaml``, ``redis.yaml``): their profile,
name, image, resources, storage, and the Secrets of their credentials and certificate.
Neither is there where the service is external (or there is no store). ``imagePullPolicy``
and ``priorityClassName`` are the values every pod of the chart reads.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from vf.emit.helm.shapes import Family
from vf.ir.plan import Infra, Plan, ServiceAuth
from vf.render.infra import DEV_FILE_STORE, file_store_limit
from vf.resources import shipped_components
from vf.textio.objects import Obj
from vf_runtime.credentials import store_acl_rule
from vf_runtime.labels import INFRA_LABEL

INFRA = "infra"
PULL_POLICY, PRIORITY_CLASS_NAME = "imagePullPolicy", "priorityClassName"


def _owns(obj: Obj) -> bool:
    """An object of the broker's or the store's templates (their NetworkPolicies are not)."""
    labels = obj["metadata"].get("labels") or {}
    return INFRA_LABEL in labels and obj.get("kind") != "NetworkPolicy"


def _values(plan: Plan) -> Obj:
    infra = plan.infra
    services: Obj = {}
    if infra.broker_profile in ("dev", "durable"):
        services["nats"] = _broker(infra)
    if infra.store_profile in ("dev", "durable", "cache"):
        services["redis"] = _store(infra, flow_id=plan.flow_id)
    out: Obj = {INFRA: services, PULL_POLICY: plan.image_pull_policy}
    if plan.priority_class is not None:
        out[PRIORITY_CLASS_NAME] = plan.priority_class
    return out


def _objects(values: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
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


def _storage(storage_class: str | None, size: str) -> Obj:
    out: Obj = {"size": size}
    if storage_class is not None:
        out["className"] = storage_class
    return out


def _auth(auth: ServiceAuth | None) -> Obj | None:
    if auth is None or auth.secret is None:
        return None
    out: Obj = {"secret": auth.secret}
    if auth.routes_secret is not None:
        out["routesSecret"] = auth.routes_secret
    return out


def _broker(infra: Infra) -> Obj:
    durable = infra.broker_profile == "durable"
    out: Obj = {
        "profile": infra.broker_profile,
        "name": infra.broker_name,
        "image": infra.broker_image,
        "resources": _resources(f"nats-{infra.broker_profile}"),
        "maxFileStore": file_store_limit(infra.broker_storage_size) if durable else DEV_FILE_STORE,
    }
    if durable:
        out["replicas"] = infra.broker_replicas
        out["storage"] = _storage(infra.broker_storage_class, infra.broker_storage_size)
    auth = _auth(infra.broker_auth)
    if auth is not None:
        out["auth"] = auth
    if infra.broker_tls is not None:
        out["tls"] = {"secret": infra.broker_tls.secret}
    return out


def _store(infra: Infra, *, flow_id: str) -> Obj:
    out: Obj = {
        "profile": infra.store_profile,
        "name": infra.store_name,
        "image": infra.store_image,
        "resources": _resources(f"redis-{infra.store_profile}"),
    }
    if infra.store_profile == "durable":
        out["storage"] = _storage(infra.store_storage_class, infra.store_storage_size)
    auth = _auth(infra.store_auth)
    if auth is not None:
        # the flow's user may reach the flow's keys and the commands its workers send
        out["auth"] = {**auth, "acl": " ".join(store_acl_rule(flow_id).split())}
    if infra.store_tls is not None:
        out["tls"] = {"secret": infra.store_tls.secret}
    return out


INFRA_ROLES = Family(
    files=("nats.yaml", "redis.yaml"),
    sections=(INFRA,),
    owns=_owns,
    values=_values,
    objects=_objects,
)
