"""The security decisions of a Plan: network reach of the flow and of the services vf runs,
and the Pod Security level its pods meet. Rendered verbatim by ``vf.render.security``."""

from __future__ import annotations

from dataclasses import dataclass

from vf.ir.records import Peer


@dataclass(frozen=True, kw_only=True)
class EgressRule:
    """One way out of the flow's pods; no ``to`` peers means any destination."""

    purpose: str
    ports: tuple[int, ...]
    protocols: tuple[str, ...]
    to: tuple[Peer, ...]


@dataclass(frozen=True, kw_only=True)
class InfraPolicy:
    """The NetworkPolicy guarding a service vf runs: the flow's pods reach its client port,
    its own servers their cluster port, and the listed peers its monitoring port."""

    name: str
    infra: str
    component: str
    client_port: int
    cluster_port: int | None
    monitoring_port: int | None
    monitoring_from: tuple[Peer, ...]
    monitoring_source: str


@dataclass(frozen=True, kw_only=True)
class Security:
    """Ingress to the flow's pods is denied; ``worker_egress`` is all they may reach."""

    worker_egress: tuple[EgressRule, ...]
    infra_policies: tuple[InfraPolicy, ...]
    pod_security_level: str
    namespace_labels: bool
    namespace_component: str | None
    host_path_nodes: tuple[str, ...]
