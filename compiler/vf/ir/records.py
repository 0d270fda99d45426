"""Value records vf.yaml declares and the Plan keeps verbatim: mounts, supervision,
Secret references, pod options and network peers.

`vf.config` parses them; the planner copies them into the Plan; renderers read them there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

Pairs = tuple[tuple[str, str], ...]
Rollout = Literal["drain", "surge"]  # how a Deployment rolls: replace in place, or surge first
# how the Plan rolls it: vf.yaml's choice, or "no-surge" (maxSurge 0, maxUnavailable 1), vf's
# own when no GPU is free for a surge pod (vf.plan.gpu.moments)
PlannedRollout = Literal["drain", "surge", "no-surge"]
# How a field reads in the Plan's JSON form (vf.ir.plan.plan_to_json), said where it is declared.
AS_OBJECT = MappingProxyType({"json": "object"})  # pairs written as a JSON object
OMIT_IF_NONE = MappingProxyType({"json": "omit-if-none"})  # added after plan v1: absent, not null


@dataclass(frozen=True, kw_only=True)
class Mount:
    """A host path (``source`` absolute) or a claim (``claim`` set) at ``path`` in the pod."""

    path: str
    read_only: bool
    source: str | None = None
    claim: str | None = None


@dataclass(frozen=True, kw_only=True)
class Supervision:
    """One restart policy for the cluster (Job backoff limit) and for ``vf run-local``."""

    max_restarts: int = 3
    backoff_seconds: tuple[int, ...] = (10, 20, 40)
    local_backoff_seconds: tuple[int, ...] = (1, 2, 4)


@dataclass(frozen=True, kw_only=True)
class SecretRef:
    name: str
    key: str


DEFAULT_CPU, DEFAULT_MEMORY = "100m", "128Mi"


@dataclass(frozen=True, kw_only=True)
class PodOptions:
    """What every vf pod of an environment gets; requests only where vf.yaml sets none."""

    default_cpu: str | None = DEFAULT_CPU
    default_memory: str | None = DEFAULT_MEMORY
    image_pull_secrets: tuple[str, ...] = ()
    service_account: str | None = None
    topology_spread: bool = True
    labels: Pairs = field(default=(), metadata=AS_OBJECT)
    annotations: Pairs = field(default=(), metadata=AS_OBJECT)
    priority_class_value: int | None = None  # emit the PriorityClass ``priority_class``
    metrics_from: tuple[Peer, ...] = ()  # who may scrape the workers' /metrics
    service_monitor: bool = False  # a metrics Service and a Prometheus ServiceMonitor


@dataclass(frozen=True, kw_only=True)
class Tracing:
    """Where the workers send their spans (``observability.tracing``, ADR 0221): rendered
    as the OpenTelemetry SDK's standard ``OTEL_*`` variables of every worker."""

    endpoint: str  # the OTLP collector's base URL
    sample_ratio: float = 0.01  # of new traces (parentbased_traceidratio)
    protocol: str = "http/protobuf"  # or grpc


@dataclass(frozen=True, kw_only=True)
class Observability:
    """What an environment ships for watching the flow (``observability:`` in vf.yaml):
    a PrometheusRule of alerts and a Grafana dashboard ConfigMap (ADR 0216), and the
    workers' trace export (ADR 0221)."""

    alerts: bool = False
    dashboard: bool = False
    latency_target_seconds: float | None = None  # the end-to-end latency alert's threshold
    tracing: Tracing | None = field(default=None, metadata=OMIT_IF_NONE)


@dataclass(frozen=True, kw_only=True)
class Peer:
    """Where traffic may come from or go to: an address block, or pods/namespaces by label.

    ``namespace`` alone is every pod of that namespace; ``pod_labels`` alone are pods of the
    flow's own namespace; both together are those pods in that namespace.
    """

    cidr: str | None = None
    namespace: str | None = None
    pod_labels: Pairs = field(default=(), metadata=AS_OBJECT)
