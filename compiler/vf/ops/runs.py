"""The runs of a flow on a broker, from the ownership metadata vf writes (STREAM-1).

A run here is one generation of one run id: the data streams whose metadata says
``vf.dev/owner=vf``, the flow, the run and the generation. Their durables, what
those still hold and the run's dead letters make its state. A run is *live* while a
reader durable shows a replica reading it: pull requests open, a delivery or ack in the
last seconds, or a message leased within its ack wait (its lease may be being renewed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from nats.js import JetStreamContext
from nats.js.api import ConsumerInfo, StreamInfo
from nats.js.errors import NotFoundError

from vf.ops.session import all_streams
from vf_runtime.naming import RunNames
from vf_runtime.topology import META_FLOW, META_GENERATION, META_OWNER, META_ROLE, META_RUN, OWNER

ACTIVE_SECONDS = 10.0  # a reading replica re-asks every 5 s (CONS-5) and acks as it goes


@dataclass(frozen=True, kw_only=True)
class Durable:
    """One durable of a run's stream and what it still holds."""

    stream: str
    name: str
    role: str
    node: str
    pending: int  # stored, not yet delivered
    leased: int  # delivered, not yet acked
    waiting: int  # pull requests open
    last_active: datetime | None  # the last delivery or ack
    ack_wait: float

    def quiet_seconds(self, now: datetime) -> float | None:
        return None if self.last_active is None else (now - self.last_active).total_seconds()

    def live(self, now: datetime) -> bool:
        """A replica reads it: pull requests are open, it delivered or acked moments ago,
        or a message is leased recently enough that a replica may be renewing the lease."""
        if self.role != "reader":
            return False
        quiet = self.quiet_seconds(now)
        if self.waiting > 0 or (quiet is not None and quiet < ACTIVE_SECONDS):
            return True
        return self.leased > 0 and quiet is not None and quiet < self.ack_wait


@dataclass(kw_only=True)
class RunState:
    """One generation of one run of the flow, as the broker holds it."""

    flow_id: str
    run_id: str
    generation: str
    streams: list[str] = field(default_factory=list)
    durables: list[Durable] = field(default_factory=list)
    messages: int = 0
    created: datetime | None = None
    dead_letters: int = 0

    @property
    def key(self) -> tuple[str, str]:
        return (self.run_id, self.generation)

    @property
    def names(self) -> RunNames:
        return RunNames(self.flow_id, self.run_id, self.generation)

    @property
    def live_readers(self) -> list[Durable]:
        now = datetime.now(UTC)
        return [d for d in self.durables if d.live(now)]

    @property
    def pending(self) -> int:
        return sum(d.pending + d.leased for d in self.durables if d.role == "reader")

    def age_seconds(self, now: datetime) -> float | None:
        return None if self.created is None else (now - self.created).total_seconds()


def owned_run(info: StreamInfo, flow_id: str) -> tuple[str, str] | None:
    """``(run, generation)`` of a data stream vf made for ``flow_id``; None for any other."""
    meta = info.config.metadata or {}
    if meta.get(META_OWNER) != OWNER or meta.get(META_FLOW) != flow_id:
        return None
    if meta.get(META_ROLE) != "data" or not meta.get(META_RUN):
        return None
    return meta[META_RUN], meta.get(META_GENERATION, "")


def _created(info: StreamInfo) -> datetime | None:
    raw = info.created
    if not raw:
        return None
    text = str(raw).rstrip("Z")
    head, _, frac = text.partition(".")
    stamp = datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}" if frac else head)
    return stamp.replace(tzinfo=UTC)


def _last_active(info: ConsumerInfo) -> datetime | None:
    stamps = [
        seq.last_active
        for seq in (info.delivered, info.ack_floor)
        if seq is not None and isinstance(seq.last_active, datetime)
    ]
    return max(stamps) if stamps else None


async def durables(js: JetStreamContext, stream: str) -> list[Durable]:
    try:
        infos = await js.consumers_info(stream)
    except NotFoundError:
        return []
    found = []
    for info in infos:
        meta = info.config.metadata or {}
        found.append(
            Durable(
                stream=stream,
                name=info.name,
                role=meta.get(META_ROLE, ""),
                node=meta.get("vf.dev/node", ""),
                pending=int(info.num_pending or 0),
                leased=int(info.num_ack_pending or 0),
                waiting=int(info.num_waiting or 0),
                last_active=_last_active(info),
                ack_wait=float(info.config.ack_wait or 30.0),
            )
        )
    return sorted(found, key=lambda d: d.name)


async def flow_runs(js: JetStreamContext, flow_id: str) -> list[RunState]:
    """Every run of ``flow_id`` the broker holds, oldest first, with its dead-letter count."""
    runs: dict[tuple[str, str], RunState] = {}
    for info in await all_streams(js):
        key = owned_run(info, flow_id)
        if key is None:
            continue
        run = runs.setdefault(key, RunState(flow_id=flow_id, run_id=key[0], generation=key[1]))
        name = info.config.name or ""
        run.streams.append(name)
        run.durables.extend(await durables(js, name))
        run.messages += int(info.state.messages or 0)
        created = _created(info)
        if created is not None and (run.created is None or created < run.created):
            run.created = created
    for run in runs.values():
        run.streams.sort()
        run.dead_letters = await dead_letter_count(js, run.names)
    return sorted(
        runs.values(), key=lambda r: (r.created or datetime.min.replace(tzinfo=UTC), r.key)
    )


async def dead_letter_count(js: JetStreamContext, names: RunNames) -> int:
    """How many dead letters the flow's DLQ keeps for ``names``' run and generation."""
    try:
        info = await js.stream_info(names.dlq_stream(), subjects_filter=names.dlq_run_subjects())
    except NotFoundError:
        return 0
    return sum((info.state.subjects or {}).values())
