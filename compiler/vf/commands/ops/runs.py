"""The runs of a flow on a broker, from the ownership metadata vf writes (STREAM-1).

A run here is one generation of one run id: the data streams whose metadata says
``vf.dev/owner=vf``, the flow, the run and the generation. Their durables, what
those still hold and the run's dead letters make its state; it is live while a replica
reads one of its durables (``vf_runtime.broker.inventory``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from nats.js import JetStreamContext
from nats.js.api import StreamInfo
from nats.js.errors import NotFoundError

from vf_runtime.broker.inventory import Durable, all_streams, durables, owned_run
from vf_runtime.broker.naming import RunNames
from vf_runtime.broker.topology import META_FLOW, META_NODE


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
    unended: list[str] = field(default_factory=list)  # streams without a terminator (EOS-1)

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
    def finished(self) -> bool:
        """A BATCH generation whose every stream holds a terminator and whose every reader
        has acknowledged all it was given. Anything short of that may still run: its Jobs
        can be waiting to be scheduled or in restart back-off, which leaves no live reader."""
        return bool(self.generation) and not self.unended and self.pending == 0

    def unfinished_reason(self) -> str:
        """Why this generation does not count as finished ("" when it does)."""
        if not self.generation:
            return "a REALTIME run never finishes"
        if self.unended:
            return (
                f"{len(self.unended)} of {len(self.streams)} stream(s) hold no end-of-stream "
                "marker yet"
            )
        if self.pending:
            return f"its readers still hold {self.pending} message(s)"
        return ""

    @property
    def pending(self) -> int:
        return sum(d.pending + d.leased for d in self.durables if d.role == "reader")

    def age_seconds(self, now: datetime) -> float | None:
        return None if self.created is None else (now - self.created).total_seconds()


def _created(info: StreamInfo) -> datetime | None:
    raw = info.created
    if not raw:
        return None
    text = str(raw).rstrip("Z")
    head, _, frac = text.partition(".")
    stamp = datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}" if frac else head)
    return stamp.replace(tzinfo=UTC)


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
        if key[1] and not await _ended(js, info):
            run.unended.append(name)
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


async def _ended(js: JetStreamContext, info: StreamInfo) -> bool:
    """Whether a BATCH stream holds a producer's end-of-stream marker (EOS-1)."""
    meta = info.config.metadata or {}
    key = owned_run(info, meta.get(META_FLOW, ""))
    if key is None:
        return False
    names = RunNames(meta.get(META_FLOW, ""), *key)
    try:
        found = await js.stream_info(
            info.config.name or "", subjects_filter=f"{names.eos_prefix(meta[META_NODE])}.>"
        )
    except (NotFoundError, KeyError):
        return False
    return bool(found.state.subjects)


async def dead_letter_count(js: JetStreamContext, names: RunNames) -> int:
    """How many dead letters the flow's DLQ keeps for ``names``' run and generation."""
    try:
        info = await js.stream_info(names.dlq_stream(), subjects_filter=names.dlq_run_subjects())
    except NotFoundError:
        return 0
    return sum((info.state.subjects or {}).values())
