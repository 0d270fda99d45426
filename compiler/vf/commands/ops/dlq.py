"""A flow's dead letters: read them, and purge them (PROTOCOL DELIV-6, NAME-9).

A dead letter is the original message bytes on ``vf.{flow}._dlq.{run}[.{gen}].{node}``
with headers saying where it came from and why it failed. Its id for operators is
``{flow token}:{DLQ stream sequence}``, stable for as long as the record is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from datetime import UTC, datetime

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

from vf.commands.ops.select import Selector, selector_problem
from vf.errors import VfError
from vf_runtime.broker.headers import stored_headers
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


def dlq_stream(flow: str) -> str:
    return RunNames(flow, "-").dlq_stream()


def subject_filter(which: Selector) -> str:
    """The narrowest DLQ subject holding every record ``which`` can select: a vf worker
    files each dead letter under its run and generation (NAME-9); the headers decide."""
    if which.run is None:
        return RunNames(which.flow, "-").dlq_subjects()
    return RunNames(which.flow, which.run, which.generation or "").dlq_run_subjects()


def selected(which: Selector, letter: DeadLetter) -> bool:
    """The one test every dead-letter command applies to a record."""
    return which.selects(
        run=letter.run_id, generation=letter.generation, node=letter.node, code=letter.code
    )


def parse_id(text: str) -> tuple[str, int]:
    """``FLOW:SEQ`` as ``vf dlq ls`` prints it."""
    flow, _, seq = text.rpartition(":")
    if selector_problem("FLOW", flow) or not seq.isdigit() or int(seq) < 1:
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
        headers=stored_headers(msg),
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


@dataclass(frozen=True, kw_only=True)
class _Walk:
    """The selected records of one pass over the DLQ, and how many the pass saw."""

    letters: list[DeadLetter]
    subjects: dict[str, tuple[int, int]]  # subject -> (records seen, highest sequence)


BATCH = 256


async def _walk(js: JetStreamContext, which: Selector, limit: int | None) -> _Walk:
    """One pass over the records under ``subject_filter(which)`` as they are now, through
    an ephemeral consumer read in batches (one request per record took 10 s for 2,000);
    the DLQ keeps records by age (limits retention), so a consumer changes nothing."""
    stream, subject = dlq_stream(which.flow), subject_filter(which)
    config = ConsumerConfig(
        ack_policy=AckPolicy.NONE,
        deliver_policy=DeliverPolicy.ALL,
        inactive_threshold=30.0,
        mem_storage=True,
        num_replicas=1,
    )
    try:
        sub = await js.pull_subscribe(subject, stream=stream, config=config)
    except NotFoundError:  # no DLQ on this broker
        return _Walk(letters=[], subjects={})
    found: list[DeadLetter] = []
    subjects: dict[str, tuple[int, int]] = {}
    name = ""
    try:
        info = await sub.consumer_info()
        name, pending = info.name, int(info.num_pending or 0)
        while pending > 0 and (limit is None or len(found) <= limit):
            for msg in await sub.fetch(min(BATCH, pending), timeout=5):
                pending -= 1
                letter = _delivered(which.flow, msg)
                seen, last = subjects.get(letter.subject, (0, 0))
                subjects[letter.subject] = (seen + 1, max(last, letter.seq))
                if selected(which, letter):
                    found.append(letter)
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
        if name:
            with contextlib.suppress(Exception):
                await js.delete_consumer(stream, name)
    return _Walk(letters=found, subjects=subjects)


def _delivered(flow: str, msg: Msg) -> DeadLetter:
    meta = msg.metadata
    return DeadLetter(
        flow=flow,
        seq=int(meta.sequence.stream),
        subject=msg.subject,
        time=_when(meta.timestamp),
        headers={str(k): str(v) for k, v in (msg.headers or {}).items()},
        data=bytes(msg.data or b""),
    )


async def read_letters(
    js: JetStreamContext, which: Selector, *, limit: int | None = LIST_LIMIT
) -> list[DeadLetter]:
    """The selected dead letters, oldest first: the first ``limit`` of them plus one (to
    tell the caller that more exist), or every one when ``limit`` is None."""
    found = (await _walk(js, which, limit)).letters
    return found if limit is None else found[: limit + 1]


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


@dataclass(frozen=True, kw_only=True)
class Purged:
    """What a purge deleted, and what it selected that is still there afterwards."""

    selected: list[str]
    remaining: list[str]


async def purge(js: JetStreamContext, which: Selector, *, confirmed: bool) -> Purged:
    """Delete exactly the records ``read_letters`` selects (when ``confirmed``); a record
    that arrives meanwhile is not touched. A subject all of whose records are selected
    (a run's node, say) is purged up to the last sequence seen, in one request; the
    other records are deleted one by one (a deletion costs the broker a few ms)."""
    walk = await _walk(js, which, None)
    chosen = walk.letters
    ids = [letter.id for letter in chosen]
    if not confirmed or not chosen:
        return Purged(selected=ids, remaining=[])
    stream = dlq_stream(which.flow)
    by_subject: dict[str, list[DeadLetter]] = {}
    for letter in chosen:
        by_subject.setdefault(letter.subject, []).append(letter)
    singles: list[DeadLetter] = []
    for subject, letters in sorted(by_subject.items()):
        seen, last = walk.subjects[subject]
        if len(letters) == seen:
            await js.purge_stream(stream, subject=subject, seq=last + 1)
        else:
            singles += letters

    async def delete(letter: DeadLetter) -> bool:
        try:
            return bool(await js.delete_msg(stream, letter.seq))
        except NotFoundError:  # expired or purged meanwhile
            return True

    left = []
    for start in range(0, len(singles), BATCH):  # a batch of requests in flight at once
        part = singles[start : start + BATCH]
        done = await asyncio.gather(*(delete(letter) for letter in part))
        left += [letter.id for letter, ok in zip(part, done, strict=True) if not ok]
    return Purged(selected=ids, remaining=left)
