"""Network and Pod Security options of vf.yaml: policy peers, egress to external services,
who may read the broker's monitoring endpoint, and the namespace's Pod Security labels.

The JSON Schema has already checked shapes; this module turns them into frozen records and
checks what a schema cannot (CIDR syntax, credentials inside a plain service URL).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from vf.ir.records import Peer

NATS_CLIENT_PORT = 4222
REDIS_PORT = 6379


@dataclass(frozen=True, kw_only=True)
class Egress:
    """Where workers may reach an external service: ports, and peers (none means anywhere)."""

    ports: tuple[int, ...]
    to: tuple[Peer, ...] = ()


@dataclass(frozen=True, kw_only=True)
class PodSecurity:
    """``namespace_labels``: vf writes the Namespace with Pod Security ``restricted`` labels."""

    namespace_labels: bool = False


def parse_peers(raw: list[dict[str, Any]] | None) -> tuple[Peer, ...]:
    """Peers in declaration order (the schema has checked each entry's shape)."""
    return tuple(
        Peer(
            cidr=entry.get("cidr"),
            namespace=entry.get("namespace"),
            pod_labels=tuple(sorted((entry.get("pod_labels") or {}).items())),
        )
        for entry in raw or []
    )


def peer_problems(peers: tuple[Peer, ...]) -> list[str]:
    """Why a peer is unusable: a malformed CIDR, or a CIDR mixed with selectors."""
    problems = []
    for peer in peers:
        if peer.cidr is None:
            continue
        try:
            ipaddress.ip_network(peer.cidr, strict=True)
        except ValueError as exc:
            problems.append(f"cidr {peer.cidr!r} is not an address block: {exc}")
        if peer.namespace is not None or peer.pod_labels:
            problems.append(f"cidr {peer.cidr!r} cannot be combined with namespace or pod_labels")
    return problems


def url_ports(url: str | None, *, default: int) -> tuple[int, ...]:
    """The TCP ports of a service URL (``,``-separated servers allowed); ``default`` when the
    URL is unknown at compile time (a Secret) or names no port; none for a unix socket."""
    if url is None:
        return (default,)
    ports: set[int] = set()
    for server in url.split(","):
        try:
            parts = urlsplit(server.strip())
            if parts.scheme != "unix":
                ports.add(parts.port or default)
        except ValueError:  # a malformed address: the schema and runtime report it
            ports.add(default)
    return tuple(sorted(ports))


def parse_egress(raw: dict[str, Any] | None, *, url: str | None, default_port: int) -> Egress:
    """Declared egress, else the ports of the service URL towards any destination."""
    data = raw or {}
    ports = tuple(sorted(set(data.get("ports") or url_ports(url, default=default_port))))
    return Egress(ports=ports, to=parse_peers(data.get("to")))


def parse_pod_security(raw: dict[str, Any] | None) -> PodSecurity:
    return PodSecurity(namespace_labels=bool((raw or {}).get("namespace_labels", False)))
