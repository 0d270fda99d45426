"""A flow's dead letters: read them, and purge them (PROTOCOL DELIV-6, NAME-9).

A dead letter is the original message bytes on ``vf.{flow}._dlq.{run}[.{gen}].{node}``
with headers saying where it came from and why it failed. Its id for operators is
``{flow token}:{DLQ stream sequence}``, stable for as long as the record is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from vf.errors import VfError
from vf_runtime.broker.naming import RunNames, token

LIST_LIMIT = 50


@dataclass(frozen=True, kw_only=True)
class DeadLetter:
    """One record of the flow's DLQ stream."""

    flow: str
    seq: int
    subject: str
    time: datetime | None
    headers: dict[str, str]
    data: bytes

    @property
    def id(self) -> str:
        return f"{token(self.flow)}:{self.seq}"

    def header(self, key: str) -> str:
        return self.headers.get(key, "")

    @property
    def node(self) -> str:
        return self.header("VF-Origin-Node")

    @property
    def run_id(self) -> str:
        return self.header("VF-Run-Id")

    @property
    def generation(self) -> str:
        return self.header("VF-Generation")

    @property
    def code(self) -> str:
        return self.header("VF-Code")

    @property
    def reason(self) -> str:
        return self.header("VF-Error").splitlines()[0] if self.header("VF-Error") else ""

    def delivered(self) -> int:
        text = self.header("VF-Num-Delivered")
        return int(text) if text.isdigit() else 0


@dataclass(frozen=True, kw_only=True)
class Filter:
    """Which dead letters a command is about."""

    run: str | None = None
    node: str | None = None
    code: str | None = None
    limit: int = LIST_LIMIT

    def matches(self, letter: DeadLetter) -> bool:
        return (
            (self.run is None or letter.run_id == self.run)
            and (self.node is None or letter.node == self.node)
            and (self.code is None or letter.code == self.code)
        )


def dlq_stream(flow: str) -> str:
    return RunNames(flow, "-").dlq_stream()


def subject_filter(flow: str, run: str | None) -> str:
    """Every dead letter of the flow, or of every generation of one run."""
    names = RunNames(flow, run or "-")
    return names.dlq_run_subjects() if run else names.dlq_subjects()


def parse_id(text: str) -> tuple[str, int]:
    """``FLOW:SEQ`` as ``vf dlq ls`` prints it."""
    flow, _, seq = text.rpartition(":")
    if not flow or not seq.isdigit() or int(seq) < 1:
        raise VfError(
            "VF_DLQ_ID",
            f"{text!r} is not a dead-letter id",
            "use an id as vf dlq ls prints it: FLOW:SEQ, e.g. poison:3",
            text,
        )
    return flow, int(seq)


def _letter(flow: str, msg: object) -> DeadLetter:
    stamp = getattr(msg, "time", None)
    return DeadLetter(
        flow=flow,
        seq=int(getattr(msg, "seq", 0) or 0),
        subject=str(getattr(msg, "subject", "") or ""),
        time=_when(stamp),
        headers={str(k): str(v) for k, v in (getattr(msg, "headers", None) or {}).items()},
        data=bytes(getattr(msg, "data", b"") or b""),
    )


def _when(stamp: object) -> datetime | None:
    if isinstance(stamp, datetime):
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
    if isinstance(stamp, str) and stamp:
        text = stamp.rstrip("Z")
        head, _, frac = text.partition(".")
        parsed = datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}" if frac else head)
        return parsed.replace(tzinfo=UTC)
    return None


async def read_letters(js: JetStreamContext, flow: str, which: Filter) -> list[DeadLetter]:
    """The first ``which.limit`` matching dead letters, oldest first (plus one, to tell
    the caller that more exist)."""
    stream, subject = dlq_stream(flow), subject_filter(flow, which.run)
    found: list[DeadLetter] = []
    seq = 0
    while len(found) <= which.limit:
        try:
            msg = await js.get_msg(stream, seq=seq + 1, subject=subject, next=True)
        except NotFoundError:
            break
        letter = _letter(flow, msg)
        seq = letter.seq
        if which.matches(letter):
            found.append(letter)
    return found


async def read_letter(js: JetStreamContext, flow: str, seq: int) -> DeadLetter:
    """One dead letter by its sequence; a named error when the DLQ no longer keeps it."""
    try:
        msg = await js.get_msg(dlq_stream(flow), seq=seq)
    except NotFoundError:
        raise VfError(
            "VF_DLQ_NOT_FOUND",
            f"the DLQ of flow {flow} keeps no record {seq} (purged, expired after 7 days, "
            "or the flow has no DLQ on this broker)",
            f"list what it keeps with vf dlq ls --flow {flow}",
            f"{token(flow)}:{seq}",
        ) from None
    return _letter(flow, msg)


async def count_letters(js: JetStreamContext, flow: str, run: str | None) -> int:
    """How many dead letters the flow (or one run of it) has; 0 without a DLQ."""
    try:
        info = await js.stream_info(dlq_stream(flow), subjects_filter=subject_filter(flow, run))
    except NotFoundError:
        return 0
    return sum((info.state.subjects or {}).values())


async def purge(js: JetStreamContext, flow: str, run: str | None) -> tuple[int, int]:
    """Purge the flow's (or one run's) dead letters; return how many before and after."""
    before = await count_letters(js, flow, run)
    if before:
        await js.purge_stream(dlq_stream(flow), subject=subject_filter(flow, run))
    return before, await count_letters(js, flow, run)
