"""What a broker, payload store and runtime store can promise: each field Known or Unknown.

An auto-provisioned service is judged by its declared profile; a bring-your-own one by
what the operator declared in vf.yaml. Anything not declared is Unknown, and Unknown is
never read as yes, zero or empty.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Generic, TypeVar

T = TypeVar("T")

INLINE_PAYLOAD_BYTES = 512 * 1024
NATS_MAX_PAYLOAD_BYTES = 8 * 1024 * 1024
DEDUP_WINDOW_SECONDS = 120


@dataclass(frozen=True)
class Known(Generic[T]):
    value: T


@dataclass(frozen=True)
class Unknown:
    reason: str


Obs = Known[T] | Unknown

NOT_DECLARED = Unknown("not declared for this external service")


@dataclass(frozen=True, kw_only=True)
class MessagingCapabilities:
    """What the message broker offers every channel."""

    adapter: str
    retained_backlog: Obs[bool]
    recoverable_delivery: Obs[bool]
    bounded_streams: Obs[bool]
    dedup_window_seconds: Obs[int]
    replication_factor: Obs[int]
    persistent_storage: Obs[bool]
    max_payload_bytes: Obs[int]
    archive: Obs[bool]


@dataclass(frozen=True, kw_only=True)
class PayloadCapabilities:
    """What the large-payload store offers; ``present`` False means payloads stay inline."""

    adapter: str
    present: bool
    durable: Obs[bool]
    evictable: Obs[bool]
    persistent_storage: Obs[bool]
    shared_across_processes: Obs[bool]
    max_object_bytes: Obs[int]


@dataclass(frozen=True, kw_only=True)
class RuntimeCapabilities:
    """The store that keeps run state (join halves, idempotency records, leases)."""

    store: str
    durable: Obs[bool]
    shared_across_processes: Obs[bool]


def nats_capabilities(
    *, profile: str, replicas: int, declared: dict[str, Any] | None = None
) -> MessagingCapabilities:
    """A NATS JetStream broker's record: from the profile, or as declared when external."""
    if profile == "external":
        return MessagingCapabilities(
            adapter="nats-jetstream", **_declared(MessagingCapabilities, declared)
        )
    durable = profile == "durable"
    return MessagingCapabilities(
        adapter="nats-jetstream",
        retained_backlog=Known(True),
        recoverable_delivery=Known(True),
        bounded_streams=Known(True),
        dedup_window_seconds=Known(DEDUP_WINDOW_SECONDS),
        replication_factor=Known(min(replicas, 3) if durable else 1),
        persistent_storage=Known(durable),
        max_payload_bytes=Known(NATS_MAX_PAYLOAD_BYTES),
        archive=Known(durable),
    )


REDIS_PROFILES: dict[str, dict[str, bool]] = {
    # profile: durable (AOF + noeviction), evictable, persistent storage (a claim)
    "dev": {"durable": True, "evictable": False, "persistent_storage": False},
    "durable": {"durable": True, "evictable": False, "persistent_storage": True},
    "cache": {"durable": False, "evictable": True, "persistent_storage": False},
}
REDIS_MAX_OBJECT_BYTES = 512 * 1024 * 1024


def redis_capabilities(
    *, profile: str, declared: dict[str, Any] | None = None
) -> PayloadCapabilities:
    """A Redis payload store's record; ``none`` is an absent store."""
    if profile == "none":
        absent = Known(False)
        return PayloadCapabilities(
            adapter="none",
            present=False,
            durable=absent,
            evictable=absent,
            persistent_storage=absent,
            shared_across_processes=absent,
            max_object_bytes=Known(0),
        )
    if profile == "external":
        return PayloadCapabilities(
            adapter="redis", present=True, **_declared(PayloadCapabilities, declared)
        )
    traits = REDIS_PROFILES[profile]
    return PayloadCapabilities(
        adapter="redis",
        present=True,
        durable=Known(traits["durable"]),
        evictable=Known(traits["evictable"]),
        persistent_storage=Known(traits["persistent_storage"]),
        shared_across_processes=Known(True),
        max_object_bytes=Known(REDIS_MAX_OBJECT_BYTES),
    )


def runtime_capabilities(payload: PayloadCapabilities) -> RuntimeCapabilities:
    """Run state lives in the payload store's Redis when there is one."""
    if not payload.present:
        return RuntimeCapabilities(
            store="none", durable=Known(False), shared_across_processes=Known(False)
        )
    return RuntimeCapabilities(
        store=payload.adapter,
        durable=payload.durable,
        shared_across_processes=payload.shared_across_processes,
    )


def _declared(record: type, declared: dict[str, Any] | None) -> dict[str, Obs[Any]]:
    values = declared or {}
    skip = {"adapter", "present"}
    return {
        f.name: Known(values[f.name]) if f.name in values else NOT_DECLARED
        for f in fields(record)
        if f.name not in skip
    }


def observation_json(value: Obs[Any]) -> dict[str, Any]:
    """``{"known": v}`` or ``{"unknown": reason}``: how the plan records an observation."""
    if isinstance(value, Known):
        return {"known": value.value}
    return {"unknown": value.reason}
