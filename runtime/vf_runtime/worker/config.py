"""A worker's configuration, read once from the ``VF_*`` environment the compiler wrote.

Every missing or malformed variable is reported in one :class:`ConfigError` that
names each of them; unknown ``VF_*`` variables are ignored (forward compatibility).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vf_runtime.broker.naming import RunNames, valid_generation
from vf_runtime.constants import BATCH, DEFAULT_ACK_WAIT, ENVELOPE_VERSION, FLOW_TYPES
from vf_runtime.errors import AuthoringError
from vf_runtime.policies import DEFAULT_CALL_TIMEOUT, DeliveryPolicy, JoinPolicy

KINDS = ("producer", "processor", "consumer")
DEFAULT_INLINE_LIMIT = 512 * 1024
BLOB_TTL: dict[str, int] = {BATCH: 86400, "realtime": 3600}
_ORDINAL = re.compile(r"-(\d+)$")


class ConfigError(Exception):
    """The environment does not describe a runnable worker; lists every problem."""

    code = "VF_ENV"

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = tuple(problems)

    def render(self) -> str:
        lines = [f"error[{self.code}] the worker environment is not usable:"]
        lines += [f"  - {p}" for p in self.problems]
        lines.append("  = fix: deploy the env ConfigMap vf compile wrote for this node")
        return "\n".join(lines)


class _Reader:
    """Reads variables and collects problems instead of stopping at the first."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.problems: list[str] = []

    def text(self, name: str, default: str | None = None) -> str:
        value = self.env.get(name)
        if value is None:
            if default is None:
                self.problems.append(f"{name} is missing")
                return ""
            return default
        return value

    def number(self, name: str, default: float | None = None, *, minimum: float = 0) -> float:
        raw = self.env.get(name)
        if raw is None:
            if default is None:
                self.problems.append(f"{name} is missing")
            return default or 0.0
        try:
            value = float(raw)
        except ValueError:
            self.problems.append(f"{name}={raw!r} is not a number")
            return default or 0.0
        if value < minimum:
            self.problems.append(f"{name}={raw!r} must be >= {minimum:g}")
        return value

    def integer(self, name: str, default: int | None = None, *, minimum: int = 0) -> int:
        raw = self.env.get(name)
        if raw is None:
            if default is None:
                self.problems.append(f"{name} is missing")
            return default or 0
        if not raw.strip().isdigit():
            self.problems.append(f"{name}={raw!r} is not a non-negative integer")
            return default or 0
        value = int(raw)
        if value < minimum:
            self.problems.append(f"{name}={raw!r} must be >= {minimum}")
        return value

    def choice(self, name: str, allowed: tuple[str, ...], default: str | None = None) -> str:
        value = self.text(name, default)
        if value and value not in allowed:
            self.problems.append(f"{name}={value!r} is not one of {', '.join(allowed)}")
        return value

    def flag(self, name: str) -> bool:
        value = self.env.get(name, "0")
        if value not in ("0", "1"):
            self.problems.append(f"{name}={value!r} must be '0' or '1'")
        return value == "1"

    def json_object(self, name: str, default: str | None = None) -> dict[str, Any]:
        raw = self.text(name, default)
        try:
            value = json.loads(raw) if raw else {}
        except json.JSONDecodeError as exc:
            self.problems.append(f"{name} is not valid JSON ({exc.msg})")
            return {}
        if not isinstance(value, dict):
            self.problems.append(f"{name} must be a JSON object")
            return {}
        return value


@dataclass(frozen=True, kw_only=True)
class WorkerConfig:
    """Everything one replica needs to know about itself and its run."""

    node_name: str
    node_kind: str
    node_class: str
    params: Mapping[str, Any]
    parents: tuple[str, ...]
    has_children: bool
    flow_id: str
    flow_type: str
    run_id: str
    nb_tasks: int
    replica_id: int
    nats_url: str
    health_port: int
    partition_by: str | None
    join_policy: JoinPolicy
    delivery: DeliveryPolicy
    blob_readers: int
    parent_replicas: Mapping[str, int]
    idempotent: bool
    blob_redis_url: str | None
    blob_ttl_seconds: int
    max_inline_bytes: int
    ack_wait_seconds: float
    retry_delay_cap: float
    connect_timeout: float
    stream_replicas: int = 1
    stream_max_bytes: int = 0  # each BATCH stream's byte limit, 0 for none (STREAM-6)
    generation: str = ""
    eos_wait_seconds: float = 30.0  # EOS-6: a contradicted count's quiet wait
    breaker_threshold: int = 10  # DELIV-11: consecutive failed calls that stop a replica
    call_timeout_seconds: float = DEFAULT_CALL_TIMEOUT  # DELIV-12: 0 = no bound
    store_full_seconds: float = 600.0  # BLOB-8: how long a write waits for a full store
    replica_leased: bool = False  # ENV-6: the ordinal is leased once connected

    @property
    def names(self) -> RunNames:
        """The broker names of this replica's run and generation."""
        return RunNames(self.flow_id, self.run_id, self.generation)

    @property
    def partitioned(self) -> bool:
        """Replicas own keys (instead of competing) when a key is set and there are several."""
        return self.partition_by is not None and self.nb_tasks > 1


def replica_id(env: Mapping[str, str]) -> int:
    """VF_REPLICA_ID, else the ordinal ending POD_NAME, else 0 (ENV-5).

    ``HOSTNAME`` is not read: a Deployment pod's name ends in a random suffix that is
    sometimes all digits, which would make a single replica publish as ``r24560``.
    """
    return _own_ordinal(env) or 0


def _own_ordinal(env: Mapping[str, str]) -> int | None:
    """The ordinal the pod was given (an Indexed Job's index, a StatefulSet's ordinal)."""
    explicit = env.get("VF_REPLICA_ID", "").strip()
    if explicit.isdigit():
        return int(explicit)
    match = _ORDINAL.search(env.get("POD_NAME", ""))
    return int(match.group(1)) if match else None


def leases_replica(env: Mapping[str, str], nb_tasks: int) -> bool:
    """Whether this replica must lease its ordinal (ENV-6): it has siblings and was given
    none (a Deployment's pods: no ``VF_REPLICA_ID``, no ``POD_NAME``)."""
    return nb_tasks > 1 and _own_ordinal(env) is None


def _parent_replicas(reader: _Reader, parents: tuple[str, ...]) -> dict[str, int]:
    counts = dict.fromkeys(parents, 1)
    raw = reader.env.get("VF_PARENT_REPLICAS", "")
    for item in filter(None, raw.split(",")):
        name, _, count = item.partition("=")
        if name not in counts or not count.isdigit() or int(count) < 1:
            reader.problems.append(f"VF_PARENT_REPLICAS entry {item!r} is malformed")
            continue
        counts[name] = int(count)
    return counts


def _join_policy(reader: _Reader, flow_type: str) -> JoinPolicy:
    raw = reader.json_object("VF_JOIN_POLICY_JSON", "")
    if not raw:
        return JoinPolicy.default_for(flow_type if flow_type in FLOW_TYPES else BATCH)
    try:
        return JoinPolicy(**raw)
    except (AuthoringError, TypeError) as exc:
        reader.problems.append(f"VF_JOIN_POLICY_JSON is invalid: {exc}")
        return JoinPolicy.default_for(flow_type)


def _delivery(reader: _Reader, flow_type: str) -> DeliveryPolicy:
    default = DeliveryPolicy.default_for(flow_type if flow_type in FLOW_TYPES else BATCH)
    if "VF_DELIVERY" not in reader.env:
        return default
    try:
        return DeliveryPolicy(
            delivery=reader.env["VF_DELIVERY"],
            max_retries=reader.integer("VF_MAX_RETRIES", default.max_retries),
            dlq=reader.env.get("VF_DLQ", default.dlq),
            on_error=reader.env.get("VF_ON_ERROR") or None,
        )
    except AuthoringError as exc:
        reader.problems.append(f"delivery settings are invalid: {exc}")
        return default


def _generation(reader: _Reader) -> str:
    value = reader.env.get("VF_GENERATION", "")
    if value and not valid_generation(value):
        reader.problems.append(
            f"VF_GENERATION={value!r} must be 1-16 letters, digits or underscores"
        )
        return ""
    return value


def load_worker_config(env: Mapping[str, str]) -> WorkerConfig:
    """Parse ``env``; raise :class:`ConfigError` naming every bad variable."""
    r = _Reader(env)
    flow_type = r.choice("VF_FLOW_TYPE", FLOW_TYPES)
    version = r.integer("VF_ENVELOPE_VERSION", ENVELOPE_VERSION)
    if version != ENVELOPE_VERSION:
        r.problems.append(f"VF_ENVELOPE_VERSION={version} is not supported (only 4)")
    # a native component names its descriptor (VF_COMPONENT_REF) instead of a Python class
    node_class = r.text("VF_NODE_CLASS", "" if env.get("VF_COMPONENT_REF") else None)
    if node_class and "." not in node_class:
        r.problems.append(f"VF_NODE_CLASS={node_class!r} must be 'module.ClassName'")
    parents = tuple(p for p in r.text("VF_PARENT_NAMES", "").split(",") if p)
    partition_by = env.get("VF_PARTITION_BY") or None
    config = WorkerConfig(
        node_name=r.text("VF_NODE_NAME"),
        node_kind=r.choice("VF_NODE_KIND", KINDS),
        node_class=node_class,
        params=r.json_object("VF_NODE_PARAMS_JSON", "{}"),
        parents=parents,
        has_children=r.flag("VF_HAS_CHILDREN"),
        flow_id=r.text("VF_FLOW_ID"),
        flow_type=flow_type,
        run_id=r.text("VF_RUN_ID"),
        nb_tasks=r.integer("VF_NB_TASKS", 1, minimum=1),
        replica_id=replica_id(env),
        nats_url=r.text("VF_NATS_URL"),
        health_port=r.integer("VF_HEALTH_PORT", 0),
        partition_by=partition_by,
        join_policy=_join_policy(r, flow_type),
        delivery=_delivery(r, flow_type),
        blob_readers=r.integer("VF_BLOB_READERS", 1),
        parent_replicas=_parent_replicas(r, parents),
        idempotent=r.flag("VF_IDEMPOTENT"),
        blob_redis_url=env.get("VF_BLOB_REDIS_URL") or None,
        blob_ttl_seconds=r.integer("VF_BLOB_TTL_SECONDS", BLOB_TTL.get(flow_type, 3600), minimum=1),
        max_inline_bytes=r.integer("VF_MAX_INLINE_PAYLOAD_BYTES", DEFAULT_INLINE_LIMIT),
        ack_wait_seconds=r.number("VF_ACK_WAIT_SECONDS", DEFAULT_ACK_WAIT, minimum=1),
        retry_delay_cap=r.number("VF_RETRY_DELAY_CAP_SECONDS", 30.0),
        connect_timeout=r.number("VF_CONNECT_TIMEOUT_SECONDS", 30.0, minimum=1),
        stream_replicas=r.integer("VF_STREAM_REPLICAS", 1, minimum=1),
        stream_max_bytes=r.integer("VF_STREAM_MAX_BYTES", 0, minimum=0),
        generation=_generation(r),
        eos_wait_seconds=r.number("VF_EOS_WAIT_SECONDS", 30.0, minimum=0),
        breaker_threshold=r.integer("VF_BREAKER_THRESHOLD", 10, minimum=0),
        call_timeout_seconds=r.number("VF_CALL_TIMEOUT_SECONDS", DEFAULT_CALL_TIMEOUT, minimum=0),
        store_full_seconds=r.number("VF_STORE_FULL_SECONDS", 600.0, minimum=0),
    )
    if leases_replica(env, config.nb_tasks):
        config = dataclasses.replace(config, replica_leased=True)
    if config.node_kind == "producer" and parents:
        r.problems.append("VF_PARENT_NAMES must be empty for a producer")
    if config.node_kind in ("processor", "consumer") and not parents:
        r.problems.append(f"VF_PARENT_NAMES is empty but a {config.node_kind} needs parents")
    if r.problems:
        raise ConfigError(r.problems)
    return config
