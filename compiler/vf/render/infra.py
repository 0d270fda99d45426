"""Auto-provisioned infrastructure: the shipped kustomize components, set up per environment.

The component files under ``kustomize/components/`` are the shapes; this module reads them
and applies one environment's settings (namespace, images, pull policy, priority class,
replicas, storage, cluster routes). The Kustomize emitter copies the same files and turns
the differences into overlay patches, so both trees agree by construction.
"""

from __future__ import annotations

import copy
import json
import sys
from functools import cache
from typing import Any

from vf.ir.plan import Infra
from vf.plan.streambytes import MIB, file_store_bytes
from vf.render.tls import (
    NATS_TLS_DIR,
    STORE_TLS_DIR,
    mount_server_tls,
    nats_tls_block,
    store_tls_args,
)
from vf.resources import resource_dir, shipped_components
from vf.textio.objects import Obj
from vf_runtime.credentials import (
    NATS_ACCOUNT,
    NATS_PASSWORD_ENV,
    NATS_ROUTE_PASSWORD_ENV,
    NATS_ROUTE_USER_ENV,
    NATS_USER_ENV,
    STORE_PASSWORD_ENV,
    STORE_USER_ENV,
    store_acl_rule,
)
from vf_runtime.labels import FLOW_LABEL, INFRA_LABEL

NATS_CLIENT_PORT = 4222


@cache
def component_files(name: str) -> dict[str, str]:
    """Every file of a shipped component, by file name."""
    folder = resource_dir("kustomize") / "components" / name
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.iterdir()) if p.is_file()}


# The shipped components' objects, parsed from their YAML when vf is built: reading the
# JSON takes a millisecond where parsing the YAML took tens of them in every compile.
# ``python -m vf.render.infra > kustomize/components.json`` writes it again, and a test
# holds it to the YAML files.
PARSED = "components.json"


def parse_components() -> dict[str, list[Obj]]:
    """Every shipped component's objects (its files but ``kustomization.yaml``), parsed."""
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    folders = sorted(p.name for p in (resource_dir("kustomize") / "components").iterdir())
    return {
        name: [
            yaml.load(text)
            for file, text in sorted(component_files(name).items())
            if file != "kustomization.yaml"
        ]
        for name in folders
    }


def components_json(parsed: dict[str, list[Obj]]) -> str:
    return json.dumps(parsed, indent=1, ensure_ascii=False) + "\n"


def _parsed() -> dict[str, list[Obj]]:
    return shipped_components()


@cache
def _component_objects(name: str) -> tuple[Obj, ...]:
    return tuple(_parsed()[name])


def component_objects(name: str) -> list[Obj]:
    """Fresh copies of the objects a component adds to an overlay."""
    return copy.deepcopy(list(_component_objects(name)))


SHIPPED_BROKER, SHIPPED_STORE = "vf-nats", "vf-redis"


# The shipped shapes' flow, in the store's ACL rule: no flow id is written so.
SHIPPED_FLOW = "FLOW"
SHIPPED_REPLICAS = 3  # the durable broker's servers in its shipped shape


def _renames(infra: Infra, flow_id: str) -> dict[str, str]:
    """The shipped shapes' names → the flow's own (``vf-nats`` → ``vf-<flow>-nats`` …),
    its credentials' default Secrets and its store's key pattern among them."""
    broker, store = infra.broker_name, infra.store_name
    shipped_routes = nats_route_urls(name=SHIPPED_BROKER, replicas=SHIPPED_REPLICAS, auth=True)
    own_routes = nats_route_urls(name=broker, replicas=SHIPPED_REPLICAS, auth=True)
    return {
        SHIPPED_BROKER: broker,
        f"{SHIPPED_BROKER}-config": f"{broker}-config",
        f"{SHIPPED_BROKER}-headless": f"{broker}-headless",
        f"{SHIPPED_BROKER}-auth": f"{broker}-auth",
        f"{SHIPPED_BROKER}-routes": f"{broker}-routes",
        shipped_routes: own_routes,
        SHIPPED_STORE: store,
        f"{SHIPPED_STORE}-data": f"{store}-data",
        f"{SHIPPED_STORE}-auth": f"{store}-auth",
        _key_pattern(SHIPPED_FLOW): _key_pattern(flow_id),
    }


def _key_pattern(flow_id: str) -> str:
    """The ACL rule's key pattern (``~vf:<flow>:*``), one argument of the store's."""
    return store_acl_rule(flow_id).split()[0]


def _scoped(value: Any, *, renames: dict[str, str], flow: str) -> Any:
    """``value`` with every shipped name replaced and the flow label beside every infra
    label (metadata, selectors, pod templates, claim templates)."""
    if isinstance(value, dict):
        out = {k: _scoped(v, renames=renames, flow=flow) for k, v in value.items()}
        if INFRA_LABEL in out:
            out[FLOW_LABEL] = flow
        return out
    if isinstance(value, list):
        return [_scoped(v, renames=renames, flow=flow) for v in value]
    if isinstance(value, str):
        return renames.get(value, value)
    return value


def flow_component(name: str, infra: Infra, *, flow: str, flow_id: str) -> list[Obj]:
    """A shipped component's objects named and labelled for one flow: the shape the
    Kustomize tree writes under ``components/<name>/`` and patches per environment."""
    renames = _renames(infra, flow_id)
    return [_scoped(o, renames=renames, flow=flow) for o in _component_objects(name)]


# The durable broker's lame-duck shutdown (ADR 200): the pod's preStop signals the server
# through its pid file; the server waits the grace period, then closes its clients over the
# duration (30 s is nats-server's minimum), inside the pod's 60 s termination grace.
NATS_PID_FILE = "/var/run/nats/nats.pid"
NATS_LAME_DUCK_GRACE, NATS_LAME_DUCK_DURATION = "10s", "30s"


DEV_FILE_STORE = "10GB"  # the dev broker's emptyDir has no size to follow


def file_store_limit(storage_size: str) -> str:
    """``max_file_store`` for a volume of ``storage_size`` (ADR 0208): 90 % of it, in whole
    MiB (the configuration's ``MB`` is 1024² bytes), as the stream shares count it."""
    size = file_store_bytes(storage_size)
    return DEV_FILE_STORE if size is None else f"{size // MIB}MB"


def nats_conf(
    *,
    durable: bool,
    replicas: int,
    name: str = SHIPPED_BROKER,
    max_file_store: str = DEV_FILE_STORE,
    auth: bool = True,
    tls: bool = False,
) -> str:
    """The NATS server configuration of a profile (max_payload above vf's inline threshold;
    ``max_file_store`` within the volume, :func:`file_store_limit`).

    With ``auth`` (ADR 0212) the flow's one user, from the pod's environment, is the only
    user of the one account with JetStream, and the durable servers take routes only from
    a peer that presents the route credentials. nats-server reads ``$VAR`` from the
    environment only as a whole value, so the routes (whose URLs carry the credentials) are
    not here but on the command line: :func:`nats_route_urls`. ``replicas`` and ``name``
    are theirs. With ``tls`` (ADR 0222) clients and, durable, routes speak TLS alone,
    with the certificate of the Secret mounted at ``NATS_TLS_DIR``."""
    del replicas, name  # the routes moved to the command line (nats_route_urls)
    lines = ["port: 4222"]
    if durable:
        lines += [
            "server_name: $POD_NAME",
            f"pid_file: {NATS_PID_FILE}",
            f"lame_duck_grace_period: {NATS_LAME_DUCK_GRACE}",
            f"lame_duck_duration: {NATS_LAME_DUCK_DURATION}",
        ]
    lines += [
        "http: 8222",
        "max_payload: 8MB",
        "jetstream {",
        "  store_dir: /data/jetstream",
        "  max_memory_store: 1GB",
        f"  max_file_store: {max_file_store}",
        "}",
    ]
    if tls:
        lines += nats_tls_block("")
    if auth:
        lines += _flow_account()
    if durable:
        lines += ["cluster {", "  name: vf", "  port: 6222"]
        if auth:
            lines += [
                "  authorization {",
                f"    user: ${NATS_ROUTE_USER_ENV}",
                f"    password: ${NATS_ROUTE_PASSWORD_ENV}",
                "  }",
            ]
        if tls:
            lines += nats_tls_block("  ")
        lines.append("}")
    return "\n".join(lines) + "\n"


def _flow_account() -> list[str]:
    """The one account, with JetStream, whose one user is the flow's (ADR 0212)."""
    user = f"{{user: ${NATS_USER_ENV}, password: ${NATS_PASSWORD_ENV}}}"
    return [
        "accounts {",
        f"  {NATS_ACCOUNT} {{",
        "    jetstream: enabled",
        f"    users: [{user}]",
        "  }",
        "}",
    ]


def nats_route_urls(*, name: str, replicas: int, auth: bool) -> str:
    """The durable servers' ``--routes``: every server's cluster address, with the route
    credentials the kubelet puts in from the pod's environment (``$(VAR)`` in args)."""
    login = f"$({NATS_ROUTE_USER_ENV}):$({NATS_ROUTE_PASSWORD_ENV})@" if auth else ""
    return ",".join(f"nats://{login}{name}-{i}.{name}-headless:6222" for i in range(replicas))


def _secret_var(var: str, secret: str, key: str) -> Obj:
    return {"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def broker_container(container: Obj, infra: Infra, *, durable: bool) -> None:
    """The shipped broker's arguments and credentials (ADR 0212): its configuration, the
    durable servers' routes, and the flow's (and routes') user from the Secrets."""
    auth = infra.broker_auth
    args = ["--config", "/etc/nats/nats.conf"]
    if durable:
        routes = nats_route_urls(
            name=infra.broker_name, replicas=infra.broker_replicas, auth=auth.secret is not None
        )
        args += ["--routes", routes]
    container["args"] = args
    env = [
        e
        for e in container.get("env") or []
        if "valueFrom" not in e or "fieldRef" in e["valueFrom"]
    ]
    if auth.secret is not None:
        env += [
            _secret_var(NATS_USER_ENV, auth.secret, "user"),
            _secret_var(NATS_PASSWORD_ENV, auth.secret, "password"),
        ]
    if durable and auth.routes_secret is not None:
        env += [
            _secret_var(NATS_ROUTE_USER_ENV, auth.routes_secret, "user"),
            _secret_var(NATS_ROUTE_PASSWORD_ENV, auth.routes_secret, "password"),
        ]
    if env:
        container["env"] = env
    else:
        container.pop("env", None)


def store_auth_args(flow_id: str) -> list[str]:
    """The shipped store's users (ADR 0212): the default user off, and the flow's user on,
    with its password from the pod's environment, confined by ``store_acl_rule``."""
    user = f"$({STORE_USER_ENV})"
    password = f">$({STORE_PASSWORD_ENV})"
    return [
        "--user",
        "default",
        "off",
        "--user",
        user,
        "on",
        password,
        *store_acl_rule(flow_id).split(),
    ]


def store_container(container: Obj, infra: Infra, *, flow_id: str) -> None:
    """The shipped store's arguments and credentials: its profile's own, then its users."""
    args = [str(a) for a in container.get("args") or []]
    if "--user" in args:
        args = args[: args.index("--user")]
    auth = infra.store_auth
    env = [
        e for e in container.get("env") or [] if "secretKeyRef" not in (e.get("valueFrom") or {})
    ]
    if infra.store_tls is not None:  # before the users: they end the arguments
        args += store_tls_args()
    if auth is not None and auth.secret is not None:
        args += store_auth_args(flow_id)
        env += [
            _secret_var(STORE_USER_ENV, auth.secret, "user"),
            _secret_var(STORE_PASSWORD_ENV, auth.secret, "password"),
        ]
    container["args"] = args
    if env:
        container["env"] = env
    else:
        container.pop("env", None)


def render_infra(
    infra: Infra,
    *,
    namespace: str,
    pull_policy: str,
    priority_class: str | None,
    flow: str,
    flow_id: str,
) -> dict[str, list[Obj]]:
    """The objects of every component the environment provisions, keyed by component."""
    out: dict[str, list[Obj]] = {}
    for name in infra.components:
        objects = flow_component(name, infra, flow=flow, flow_id=flow_id)
        for obj in objects:
            obj["metadata"]["namespace"] = namespace
            _configure(obj, name, infra, flow_id=flow_id)
            template = obj.get("spec", {}).get("template")
            if template is not None:
                pod = template["spec"]
                for container in pod["containers"]:
                    container["image"] = (
                        infra.broker_image if name.startswith("nats") else infra.store_image
                    )
                    container["imagePullPolicy"] = pull_policy
                if priority_class is not None:
                    pod["priorityClassName"] = priority_class
        out[name] = objects
    return out


def _configure(obj: Obj, component: str, infra: Infra, *, flow_id: str) -> None:
    kind = obj["kind"]
    durable = component == "nats-durable"
    if kind == "ConfigMap" and component.startswith("nats"):
        obj["data"]["nats.conf"] = nats_conf(
            durable=durable,
            replicas=infra.broker_replicas,
            name=infra.broker_name,
            max_file_store=(
                file_store_limit(infra.broker_storage_size) if durable else DEV_FILE_STORE
            ),
            auth=infra.broker_auth.secret is not None,
            tls=infra.broker_tls is not None,
        )
    if kind in ("StatefulSet", "Deployment"):
        pod = obj["spec"]["template"]["spec"]
        container = pod["containers"][0]
        if component.startswith("nats"):
            broker_container(container, infra, durable=durable)
            mount_server_tls(pod, infra.broker_tls, folder=NATS_TLS_DIR)
        else:
            store_container(container, infra, flow_id=flow_id)
            mount_server_tls(pod, infra.store_tls, folder=STORE_TLS_DIR)
    if kind == "StatefulSet":
        obj["spec"]["replicas"] = infra.broker_replicas
        claim = obj["spec"]["volumeClaimTemplates"][0]["spec"]
        _storage(claim, infra.broker_storage_class, infra.broker_storage_size)
    elif kind == "PersistentVolumeClaim":
        _storage(obj["spec"], infra.store_storage_class, infra.store_storage_size)


def _storage(spec: Obj, storage_class: str | None, size: str) -> None:
    if storage_class is None:
        spec.pop("storageClassName", None)
    else:
        spec["storageClassName"] = storage_class
    spec["resources"]["requests"]["storage"] = size


if __name__ == "__main__":
    sys.stdout.write(components_json(parse_components()))
