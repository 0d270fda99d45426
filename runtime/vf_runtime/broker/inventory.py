"""What a broker holds for a flow, read from the ownership metadata vf writes (STREAM-1).

Shared by ``vf-provision`` (which reclaims superseded runs) and the operator commands
(``vf runs``, ``vf teardown``). Nothing here matches names: a stream is a run's because
its metadata says so. A reader durable is *live* while a replica reads it: pull
requests are open (a reading replica always keeps some, PROTOCOL CONS-5), or a message
is leased and the durable delivered or acked within its ack wait (a replica may be
renewing the lease while its node works). A replica that stopped leaves neither for
longer than that.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from nats.js import JetStreamContext
from nats.js.api import ConsumerInfo, StreamInfo
from nats.js.errors import NotFoundError

from vf_runtime.broker.topology import (
    META_FLOW,
    META_GENERATION,
    META_NODE,
    META_OWNER,
    META_ROLE,
    META_RUN,
    OWNER,
)

PAGE = 256  # JetStream answers stream lists a page at a time


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
        """Whether a replica reads this durable now (only reader durables are read)."""
        if self.role != "reader":
            return False
        if self.waiting > 0:
            return True
        quiet = self.quiet_seconds(now)
        return self.leased > 0 and quiet is not None and quiet < self.ack_wait


async def all_streams(js: JetStreamContext) -> list[StreamInfo]:
    """Every stream on the broker, page by page."""
    found: list[StreamInfo] = []
    while True:
        page = await js.streams_info(offset=len(found))
        found.extend(page)
        if len(page) < PAGE:
            return found


def owned_run(info: StreamInfo, flow_id: str) -> tuple[str, str] | None:
    """``(run, generation)`` of a data stream vf made for ``flow_id``; None for any other."""
    meta = info.config.metadata or {}
    if meta.get(META_OWNER) != OWNER or meta.get(META_FLOW) != flow_id:
        return None
    if meta.get(META_ROLE) != "data" or not meta.get(META_RUN):
        return None
    return meta[META_RUN], meta.get(META_GENERATION, "")


def _last_active(info: ConsumerInfo) -> datetime | None:
    stamps = [
        seq.last_active
        for seq in (info.delivered, info.ack_floor)
        if seq is not None and isinstance(seq.last_active, datetime)
    ]
    return max(stamps) if stamps else None


async def durables(js: JetStreamContext, stream: str) -> list[Durable]:
    """The durables of ``stream`` (none when it is gone), by name."""
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
                node=meta.get(META_NODE, ""),
                pending=int(info.num_pending or 0),
                leased=int(info.num_ack_pending or 0),
                waiting=int(info.num_waiting or 0),
                last_active=_last_active(info),
                ack_wait=float(info.config.ack_wait or 30.0),
            )
        )
    return sorted(found, key=lambda d: d.name)


async def live_readers(js: JetStreamContext, streams: list[str]) -> list[Durable]:
    """The reader durables of ``streams`` that a replica reads now."""
    now = datetime.now(UTC)
    return [d for stream in streams for d in await durables(js, stream) if d.live(now)]
