"""The Plan IR: every decision for one environment, made once and rendered verbatim.

Serialised as ``plan/<env>.json`` (schema ``schemas/plan.v1.schema.json``) so that
reviewers see the decisions in a pull request.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal

from vf.ir.admission import Admission
from vf.ir.capabilities import Known, Unknown, observation_json
from vf.ir.gpu import GpuPlan
from vf.ir.records import (
    AS_OBJECT,
    OMIT_IF_NONE,
    Mount,
    Observability,
    PlannedRollout,
    PodOptions,
    SecretRef,
    Supervision,
)
from vf.ir.security import Security
from vf_runtime.components import ComponentPort
from vf_runtime.constants import DeviceType, FlowType, NodeKind

PLAN_VERSION = "vf.plan/v1"

Pairs = tuple[tuple[str, str], ...]
AuthKind = Literal["password", "token", "creds"]  # what an external broker's clients present
WorkloadKind = Literal["Deployment", "StatefulSet", "Job"]


@dataclass(frozen=True, kw_only=True)
class ContainerResources:
    """Host resources of a container (Kubernetes quantities as strings): vf.yaml's entries,
    and what the Plan gives each workload."""

    cpu: str | None = None
    memory: str | None = None
    cpu_limit: str | None = None
    memory_limit: str | None = None


@dataclass(frozen=True, kw_only=True)
class Workload:
    """One node's Kubernetes workload and its companions."""

    node: str
    node_kind: NodeKind
    kind: WorkloadKind
    name: str
    # the flow's ConfigMap this worker reads VF_NB_TASKS from, when it scales in place (a
    # change of its replicas must leave its pod template alone); None: every variable of
    # ``env`` is in the pod template
    replicas_configmap: str | None
    headless_service: str | None
    pdb: str | None
    replicas: int
    indexed: bool
    image: str
    resources: ContainerResources
    env: Pairs = field(metadata=AS_OBJECT)
    labels: Pairs = field(metadata=AS_OBJECT)
    selector: Pairs = field(metadata=AS_OBJECT)
    config_hash: str
    probes: bool
    backoff_limit: int | None
    # a Job's podFailurePolicy: a pod failed by a disruption (drain, preemption, eviction)
    # is replaced without counting toward backoffLimit (plan/jobs.py ignores_disruptions)
    ignore_disruptions: bool
    device_type: DeviceType
    gpu_count: int
    mounts: tuple[Mount, ...]
    rollout: PlannedRollout | None
    component: ComponentRun | None = field(default=None, metadata=OMIT_IF_NONE)
    # the node's declared warm-up: the startup probe allows twice it (vf.plan.warmup)
    warmup_seconds: int | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True, kw_only=True)
class ComponentRun:
    """How a native component's container runs: its descriptor ref, command and ports."""

    ref: str
    command: tuple[str, ...]
    ports: tuple[ComponentPort, ...]


@dataclass(frozen=True, kw_only=True)
class Channel:
    """The output of one node: its subjects, stream and the durables that read it."""

    node: str
    subject: str
    eos_subject: str
    stream: str
    profile: str
    readers: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Provision:
    """The Job that creates the run's streams and durables before workers need them."""

    job: str
    image: str
    topology_configmaps: tuple[str, ...]
    topology_shards: tuple[str, ...]
    backoff_limit: int
    ignore_disruptions: bool  # as Workload.ignore_disruptions
    labels: Pairs = field(metadata=AS_OBJECT)
    resources: ContainerResources
    reclaim_superseded: bool = False  # PROV-5: also delete the flow's other, idle runs


@dataclass(frozen=True, kw_only=True)
class ServiceAuth:
    """The credentials a broker or payload store asks of the flow's clients (ADR 0212).

    ``kind`` is what the clients present: a user and a password, a token, a ``.creds``
    file (an external broker), or nothing. ``declared``: vf.yaml chose it (``auth: none``
    among others); else it is vf's default (credentials on for the servers vf runs, none of
    vf's own for an external service, whose URL may carry them). The Secrets are named,
    never held: the operator creates them (the tree README says how)."""

    kind: Literal["password", "token", "creds", "none"]
    declared: bool
    secret: str | None = field(default=None, metadata=OMIT_IF_NONE)
    # the durable broker's route credentials (its servers' pods only)
    routes_secret: str | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True, kw_only=True)
class ServiceTls:
    """A broker or payload store that speaks TLS (ADR 0222): the Secret of its certificate
    (keys ``tls.crt``, ``tls.key``, ``ca.crt``, as cert-manager writes them) for a server
    vf runs; for an external one, the Secret whose ``ca.crt`` its clients trust."""

    secret: str


@dataclass(frozen=True, kw_only=True)
class StreamBytes:
    """Each BATCH stream's byte limit, ``VF_STREAM_MAX_BYTES`` (STREAM-6, ADR 0232): a share
    of the shipped durable broker's ``max_file_store`` (``source`` ``volume``: the store split
    into ``shares``, two per BATCH stream and one for the dead-letter stream), or vf.yaml's
    ``broker.stream_max_bytes`` (``source`` ``vf.yaml``; ``max_file_store`` and ``shares``
    are then None)."""

    max_bytes: int
    source: Literal["volume", "vf.yaml"]
    streams: int  # the flow's BATCH streams
    max_file_store: int | None = field(default=None, metadata=OMIT_IF_NONE)
    shares: int | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True, kw_only=True)
class Infra:
    """The broker and payload store of an environment, and what vf provisions for them."""

    broker_name: str  # the flow's own NATS workload and Service (also when external: unused)
    store_name: str
    broker_profile: str
    broker_replicas: int
    stream_replicas: int
    broker_storage_class: str | None
    broker_storage_size: str
    broker_image: str
    store_profile: str
    store_storage_class: str | None
    store_storage_size: str
    store_image: str
    components: tuple[str, ...]
    nats_url: str | None
    nats_url_secret: SecretRef | None
    store_url: str | None
    store_url_secret: SecretRef | None
    # who may use the broker and the store (None: no store)
    broker_auth: ServiceAuth
    store_auth: ServiceAuth | None = field(default=None, metadata=OMIT_IF_NONE)  # none: no store
    # TLS on the clients' (and the durable broker's routes') connections; None: plaintext
    broker_tls: ServiceTls | None = field(default=None, metadata=OMIT_IF_NONE)
    store_tls: ServiceTls | None = field(default=None, metadata=OMIT_IF_NONE)
    # each BATCH stream's max_bytes (ADR 0232); None: no byte limit
    stream_bytes: StreamBytes | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True, kw_only=True)
class ScaleTrigger:
    """One input of a scaled worker: the parent's stream and the worker's durable on it."""

    stream: str
    consumer: str


@dataclass(frozen=True, kw_only=True)
class ScaleBehavior:
    """The HorizontalPodAutoscaler behaviour of a scaled node that warms up (vf.plan.warmup):
    scale up only on lag that lasted a warm-up, by at most ``scale_up_percent`` per warm-up,
    and scale down on lag that has been gone for ``scale_down_window`` seconds."""

    warmup_seconds: int
    scale_up_window: int
    scale_up_percent: int
    scale_up_period: int
    scale_down_window: int


@dataclass(frozen=True, kw_only=True)
class Scaler:
    """One autoscaled worker (a KEDA ScaledObject): its Deployment, bounds and lag triggers."""

    node: str
    deployment: str
    min_replicas: int
    max_replicas: int
    lag_threshold: int
    polling_interval: int
    cooldown: int
    endpoint: str
    account: str
    triggers: tuple[ScaleTrigger, ...]
    labels: Pairs = field(metadata=AS_OBJECT)
    behavior: ScaleBehavior | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True, kw_only=True)
class Plan:
    """Every decision vf made for one environment."""

    version: str
    environment: str
    namespace: str
    kubernetes_version: str
    flow_id: str
    flow_type: FlowType
    run_id: str
    run_id_source: str
    image_pull_policy: str
    priority_class: str | None
    broker_configmap: str
    network_policy: str
    flow_labels: Pairs = field(metadata=AS_OBJECT)
    run_labels: Pairs = field(metadata=AS_OBJECT)
    provision: Provision
    workloads: tuple[Workload, ...]
    channels: tuple[Channel, ...]
    infra: Infra
    admission: Admission
    gpu: GpuPlan | None
    supervision: Supervision
    security: Security
    warnings: tuple[str, ...]
    # BATCH only: the incarnation of the run these workloads make (omitted when None)
    generation: str | None = field(default=None, metadata=OMIT_IF_NONE)
    # vf.yaml's pod options, when they are not the defaults
    pods: PodOptions | None = field(default=None, metadata=OMIT_IF_NONE)
    # The workers KEDA scales on their input lag (omitted when autoscaling is off)
    autoscaling: tuple[Scaler, ...] | None = field(default=None, metadata=OMIT_IF_NONE)
    # vf.yaml's name for the environment's cluster, when it gives one
    cluster: str | None = field(default=None, metadata=OMIT_IF_NONE)
    # BATCH only: producers not declared replayable with an idempotent consumer downstream,
    # whose restart re-emits items that consumer applies again (omitted when there are none)
    unreplayable_producers: tuple[str, ...] | None = field(default=None, metadata=OMIT_IF_NONE)
    # vf.yaml's observability: alerts and a dashboard (omitted when neither is asked for)
    observability: Observability | None = field(default=None, metadata=OMIT_IF_NONE)


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """A JSON-ready dict of the plan: pairs become objects, tuples become lists."""
    document: dict[str, Any] = _jsonable(plan)
    return document


def record_to_json(record: object) -> Any:
    """Any plan record (a workload, the provision Job) as plan_to_json writes it."""
    return _jsonable(record)


_AS_IS = frozenset({str, int, float, bool, type(None)})  # JSON already


def _jsonable(value: Any) -> Any:
    kind = type(value)
    if kind in _AS_IS:
        return value
    if kind is tuple:
        return [_jsonable(v) for v in value]
    if isinstance(value, Known | Unknown):
        return observation_json(value)
    if hasattr(value, "__dataclass_fields__"):
        document = {}
        for name, form in _json_fields(type(value)):
            item = getattr(value, name)
            if form == "object":
                document[name] = dict(item)
            elif type(item) in _AS_IS:  # most fields: no call
                if not (item is None and form == "omit-if-none"):
                    document[name] = item
            else:
                document[name] = _jsonable(item)
        return document
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


_FORMS: dict[type, tuple[tuple[str, str], ...]] = {}


def _json_fields(record: type) -> tuple[tuple[str, str], ...]:
    """Each field of a record and how its JSON form writes it (its ``json`` metadata)."""
    forms = _FORMS.get(record)
    if forms is None:
        forms = _FORMS[record] = tuple((f.name, f.metadata.get("json", "")) for f in fields(record))
    return forms
