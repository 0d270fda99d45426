"""Stream and consumer settings of a run, shared by ``vf-provision`` and the workers.

BATCH streams keep every message until each reader acked it and push back on
publishers when full; REALTIME streams keep only the freshest message per subject.
Each replica's end-of-stream marker has its own subject, so a REALTIME stream
never evicts one marker with another or with data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    RetentionPolicy,
    StreamConfig,
)

from vf_runtime import labels
from vf_runtime.broker.naming import RunNames
from vf_runtime.constants import BATCH, BATCH_MAX_MSGS

DUPLICATE_WINDOW = 120.0
DLQ_MAX_AGE = 7 * 24 * 3600.0
PREFETCH = 64  # the most a replica fetches ahead of its node (fast nodes; slow ones less)
PUBLISH_WINDOW = 64  # the most outputs a replica keeps in flight before their acks
DEFAULT_JOIN_PENDING = 256
OWNER = labels.MANAGER
META_OWNER, META_FLOW, META_RUN, META_NODE = (
    labels.OWNER_KEY,
    labels.FLOW_LABEL,
    labels.RUN_LABEL,
    labels.NODE_LABEL,
)
META_ROLE, META_GENERATION = labels.ROLE_KEY, labels.GENERATION_KEY


@dataclass(frozen=True, kw_only=True)
class NodeTopology:
    """One line of the provision topology: what the broker needs to know of a node."""

    name: str
    parents: tuple[str, ...]
    replicas: int
    partitioned: bool
    has_children: bool
    max_deliver: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NodeTopology:
        return cls(
            name=str(data["name"]),
            parents=tuple(str(p) for p in data.get("parents", ())),
            replicas=int(data.get("replicas", 1)),
            partitioned=bool(data.get("partitioned", False)),
            has_children=bool(data.get("has_children", False)),
            max_deliver=int(data.get("max_deliver", 1)),
        )


def read_topology(directory: Path) -> tuple[NodeTopology, ...]:
    """Every node of the run, from the ``nodes-NNN.jsonl`` shards in ``directory``."""
    nodes: list[NodeTopology] = []
    for shard in sorted(directory.glob("nodes-*.jsonl")):
        for line in shard.read_text(encoding="utf-8").splitlines():
            if line.strip():
                nodes.append(NodeTopology.from_json(json.loads(line)))
    return tuple(nodes)


def credit(*, replicas: int, partitioned: bool, parents: int, max_pending: int) -> int:
    """In-flight messages a durable may lease: enough for every replica and a join's halves.

    Competing replicas share one durable, so its credit grows with their number; a
    partitioned replica has its own. A join holds up to ``max_pending`` open groups.
    """
    per_replica = 1 + PREFETCH + PUBLISH_WINDOW
    base = per_replica if partitioned else replicas * per_replica
    if parents > 1:
        base = max(base, max_pending * (parents - 1) + 1)
    return base


def owner_metadata(names: RunNames, *, node: str | None, role: str) -> dict[str, str]:
    meta = {META_OWNER: OWNER, META_FLOW: names.flow_id, META_ROLE: role}
    if node is not None:
        meta[META_NODE] = node
        meta[META_RUN] = names.run_id
        if names.generation:
            meta[META_GENERATION] = names.generation
    return meta


def stream_config(
    names: RunNames, node: str, *, flow_type: str, replicas: int = 1, max_bytes: int = 0
) -> StreamConfig:
    """The stream of ``node``'s output for this flow type (``replicas``: JetStream copies;
    ``max_bytes``: a BATCH stream's share of the broker's file store, 0 for none, STREAM-6)."""
    common: dict[str, Any] = {
        "name": names.stream(node),
        "num_replicas": replicas,
        "subjects": [names.subject(node), f"{names.eos_prefix(node)}.>"],
        "duplicate_window": DUPLICATE_WINDOW,
        "metadata": owner_metadata(names, node=node, role="data"),
    }
    if flow_type == BATCH:
        return StreamConfig(
            **common,
            retention=RetentionPolicy.INTEREST,
            max_msgs=BATCH_MAX_MSGS,
            max_bytes=max_bytes if max_bytes > 0 else None,
            discard=DiscardPolicy.NEW,
        )
    return StreamConfig(
        **common,
        retention=RetentionPolicy.LIMITS,
        max_msgs_per_subject=1,
        discard=DiscardPolicy.OLD,
    )


def dlq_config(names: RunNames, *, share: int = 0) -> StreamConfig:
    """The flow's dead-letter stream: bounded by age and, beside BATCH streams of ``share``
    bytes each (``VF_STREAM_MAX_BYTES``), by one share too: the one the compiler's split
    leaves for it (ADR 0232, 0239). Discard new: a full one refuses a dead letter (the
    worker names it, ``VF_DLQ_FULL``) and never drops an older one to make room."""
    return StreamConfig(
        name=names.dlq_stream(),
        subjects=[names.dlq_subjects()],
        retention=RetentionPolicy.LIMITS,
        discard=DiscardPolicy.NEW,
        max_age=DLQ_MAX_AGE,
        max_bytes=share if share > 0 else None,
        duplicate_window=DUPLICATE_WINDOW,
        metadata=owner_metadata(names, node=None, role="dlq"),
    )


@dataclass(frozen=True, kw_only=True)
class ReaderSpec:
    """How one child reads one parent: durable name, delivery budget and credit."""

    child: str
    parent: str
    partition: int | None
    max_deliver: int
    credit: int
    ack_wait: float


def data_consumer_config(names: RunNames, spec: ReaderSpec) -> ConsumerConfig:
    """A pull durable on the parent's stream, filtered to its data subject."""
    return ConsumerConfig(
        durable_name=names.durable(spec.child, parent=spec.parent, partition=spec.partition),
        filter_subject=names.subject(spec.parent),
        deliver_policy=DeliverPolicy.ALL,
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=spec.ack_wait,
        max_deliver=spec.max_deliver,
        max_ack_pending=spec.credit,
        metadata=owner_metadata(names, node=spec.child, role="reader"),
    )


def eos_anchor_config(names: RunNames, node: str) -> ConsumerConfig:
    """Never fetched: under interest retention it keeps every end-of-stream marker."""
    return ConsumerConfig(
        durable_name=names.eos_anchor(node),
        filter_subject=f"{names.eos_prefix(node)}.>",
        deliver_policy=DeliverPolicy.ALL,
        ack_policy=AckPolicy.EXPLICIT,
        metadata=owner_metadata(names, node=node, role="eos-anchor"),
    )


def readers_of(
    nodes: tuple[NodeTopology, ...], *, ack_wait: float, join_pending: int = DEFAULT_JOIN_PENDING
) -> list[ReaderSpec]:
    """Every data durable of the run, in topology order."""
    specs: list[ReaderSpec] = []
    for child in nodes:
        partitions: list[int | None] = list(range(child.replicas)) if child.partitioned else [None]
        amount = credit(
            replicas=child.replicas,
            partitioned=child.partitioned,
            parents=len(child.parents),
            max_pending=join_pending,
        )
        for parent in child.parents:
            for partition in partitions:
                specs.append(
                    ReaderSpec(
                        child=child.name,
                        parent=parent,
                        partition=partition,
                        max_deliver=child.max_deliver,
                        credit=amount,
                        ack_wait=ack_wait,
                    )
                )
    return specs
