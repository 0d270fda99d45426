"""Plan the infrastructure of an environment: broker, payload store and the provision Job."""

from __future__ import annotations

from collections.abc import Mapping

from vf import names
from vf.config.infra import AuthChoice
from vf.config.targets import Environment
from vf.ir.plan import (
    ContainerResources,
    Infra,
    Provision,
    ServiceAuth,
    ServiceTls,
    StreamBytes,
)
from vf.plan.context import PlanContext
from vf.plan.jobs import ignores_disruptions
from vf.resources import shipped_components
from vf.textio.jsontext import compact_json
from vf_runtime.labels import COMPONENT, NAME, PROVISION

PROVISION_BACKOFF_LIMIT = 6
TOPOLOGY_SHARD_BYTES = 256 * 1024
# What creating streams and durables needs, so the Job is never the first pod evicted.
PROVISION_RESOURCES = ContainerResources(cpu="50m", memory="64Mi", memory_limit="256Mi")
# A StatefulSet's name leaves room for the controller-revision-hash label, and the broker's
# companions (``-headless``, ``-config``) still fit 63 characters.
INFRA_NAME_MAX = 52


def infra_names(flow_id: str) -> tuple[str, str]:
    """The flow's own broker and payload store names, so flows share a namespace."""
    return (
        names.k8s_name("vf", flow_id, "nats", limit=INFRA_NAME_MAX),
        names.k8s_name("vf", flow_id, "redis", limit=INFRA_NAME_MAX),
    )


def infra_image_warnings(env: Environment) -> tuple[str, ...]:
    """The servers vf runs for an environment that keeps data (a durable broker, a durable or
    cache store) whose image is not pinned by digest (ADR 0239): a tag is a name its registry
    may point at other bytes. The dev profiles, made to try a flow, say nothing."""
    found = []
    if env.broker.profile == "durable" and "@sha256:" not in env.broker.image:
        found.append(_unpinned("broker", env.broker.image))
    store = env.payload_store
    if store.profile in ("durable", "cache") and "@sha256:" not in store.image:
        found.append(_unpinned("payload_store", store.image))
    return tuple(found)


def _unpinned(key: str, image: str) -> str:
    return (
        f"{key}.image {image} is not pinned by digest: set {key}.image to "
        f"{image}@sha256:<the digest your registry gives for it> (docs/security.md)"
    )


def plan_infra(env: Environment, *, flow_id: str, stream_bytes: StreamBytes | None = None) -> Infra:
    """What the environment's broker and payload store are, and the components they need;
    ``stream_bytes``, each BATCH stream's byte limit (:mod:`vf.plan.streambytes`)."""
    broker, store = env.broker, env.payload_store
    broker_name, store_name = infra_names(flow_id)
    components = []
    if broker.profile in ("dev", "durable"):
        components.append(f"nats-{broker.profile}")
    if store.profile in ("dev", "durable", "cache"):
        components.append(f"redis-{store.profile}")
    # In-namespace names: the same in every environment and wherever a release installs it;
    # the schemes of TLS where vf.yaml asks it (ADR 0222)
    broker_tls = ServiceTls(secret=broker.tls_secret) if broker.tls_secret else None
    store_tls = ServiceTls(secret=store.tls_secret) if store.tls_secret else None
    provisioned_nats = f"{'tls' if broker_tls else 'nats'}://{broker_name}:4222"
    provisioned_redis = f"{'rediss' if store_tls else 'redis'}://{store_name}:6379/0"
    return Infra(
        broker_name=broker_name,
        store_name=store_name,
        broker_profile=broker.profile,
        broker_replicas=broker.replicas,
        stream_replicas=broker.stream_replicas,
        broker_storage_class=broker.storage_class,
        broker_storage_size=broker.storage_size,
        broker_image=broker.image,
        store_profile=store.profile,
        store_storage_class=store.storage_class,
        store_storage_size=store.storage_size,
        store_image=store.image,
        components=tuple(components),
        nats_url=broker.url if broker.profile == "external" else provisioned_nats,
        nats_url_secret=broker.url_secret,
        store_url={"none": None, "external": store.url}.get(store.profile, provisioned_redis),
        store_url_secret=store.url_secret,
        broker_auth=plan_auth(broker.auth, profile=broker.profile, name=broker_name, routes=True),
        store_auth=None
        if store.profile == "none"
        else plan_auth(store.auth, profile=store.profile, name=store_name, routes=False),
        broker_tls=broker_tls,
        store_tls=store_tls,
        stream_bytes=stream_bytes,
    )


def plan_auth(choice: AuthChoice | None, *, profile: str, name: str, routes: bool) -> ServiceAuth:
    """Who may use a broker or store (ADR 0212): the servers vf runs ask credentials unless
    vf.yaml says ``auth: none``, from ``<name>-auth`` (and the durable broker's routes from
    ``<name>-routes``) unless it names other Secrets; an external service asks what
    vf.yaml declares, and nothing of vf's own when it declares nothing."""
    external = profile == "external"
    if choice is None and external:
        return ServiceAuth(kind="none", declared=False)
    if choice is not None and choice.off:
        return ServiceAuth(kind="none", declared=True)
    declared = choice or AuthChoice()
    durable_routes = routes and profile == "durable"
    return ServiceAuth(
        kind=declared.kind if external else "password",
        declared=choice is not None,
        secret=declared.secret or f"{name}-auth",
        routes_secret=(declared.routes_secret or f"{name}-routes") if durable_routes else None,
    )


def plan_provision(ctx: PlanContext, images: Mapping[str, str]) -> Provision:
    lines = [
        compact_json(
            {
                "name": node.name,
                "parents": list(node.parents),
                "replicas": ctx.replicas[node.name],
                "partitioned": ctx.partitioned(node),
                "has_children": bool(node.children),
                "max_deliver": node.delivery.max_deliver,
                "join_max_pending": node.join_policy.max_pending
                if node.join_policy is not None and len(node.parents) > 1
                else None,
            }
        )
        for node in ctx.graph.nodes
    ]
    shards: list[str] = []
    current: list[str] = []
    size = 0
    for line in lines:
        if current and size + len(line) + 1 > TOPOLOGY_SHARD_BYTES:
            shards.append("\n".join(current) + "\n")
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    shards.append("\n".join(current) + "\n")
    base = ("vf", ctx.flow_id, ctx.run_id, "topology")
    cms = (
        (names.k8s_name(*base),)
        if len(shards) == 1
        else tuple(names.k8s_name(*base, str(i)) for i in range(len(shards)))
    )
    image = (
        ctx.env.workloads.provision_image
        or ctx.env.default_image
        or images[ctx.graph.nodes[0].name]
    )
    labels = tuple(sorted({*ctx.run_labels, (NAME, "vf-provision"), (COMPONENT, PROVISION)}))
    return Provision(
        job=names.k8s_name("vf", ctx.flow_id, ctx.run_id, "provision"),
        image=image,
        topology_configmaps=cms,
        topology_shards=tuple(shards),
        backoff_limit=PROVISION_BACKOFF_LIMIT,
        ignore_disruptions=ignores_disruptions(ctx.env.kubernetes_version),
        labels=labels,
        resources=PROVISION_RESOURCES,
        reclaim_superseded=ctx.env.broker.reclaim_superseded,
    )


REDIS_UNITS = {"": 1, "k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2}
REDIS_UNITS |= {"g": 1000**3, "gb": 1024**3}


def store_max_memory(profile: str) -> int | None:
    """The shipped payload store's ``--maxmemory`` in bytes (Redis reads ``4gb`` as 4 GiB);
    None for a profile vf does not run, or one without a limit."""
    if profile not in ("dev", "durable"):  # the cache store evicts instead of refusing
        return None
    for obj in shipped_components()[f"redis-{profile}"]:
        if obj["kind"] != "Deployment":
            continue
        args = obj["spec"]["template"]["spec"]["containers"][0]["args"]
        if "--maxmemory" in args:
            text = str(args[args.index("--maxmemory") + 1]).lower()
            number = text.rstrip("kmgb")
            return int(number) * REDIS_UNITS[text[len(number) :]] or None
    return None
