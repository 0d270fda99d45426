"""Competing replicas pool what they received, so any of them can check a marker (EOS-8).

Replicas that share a durable each receive part of a parent replica's output: none of
them alone can compare that replica's end-of-stream count with what arrived. Each one
publishes its tally (the stream sequences it received, per parent replica and publisher
life) on a retained subject of its own below the parent's end-of-stream root, and a
replica checking a marker takes the union of every sibling's latest tally.

A replica that finds a tally of its own when it starts is a restarted life: what the
earlier life received is unknown, so it publishes that its tally is not exact, and no
sibling checks counts against that parent any more (EOS-3 alone decides, as for every
other restarted reader).

The tallies live in the parent's stream, so a stream without room refuses them (EOS-8,
ADR 0244). A first life's opening tally says what no tally says (nothing received, exact):
it is left to the first check, and the replica reads on. A restarted life must say that
its counts are not exact: on a stream vf-provision capped as superseded (PROV-6) it ends
as superseded; on a stream at its share it ends by the name of a full broker.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from nats.js import JetStreamContext
from nats.js.api import RawStreamMsg
from nats.js.errors import APIError, NotFoundError

from vf_runtime.broker.client import BrokerError, patiently
from vf_runtime.broker.naming import RunNames, token
from vf_runtime.labels import CAPPED_KEY
from vf_runtime.worker.outputs import broker_full

log = logging.getLogger("vf.worker")
LOOKUP_TIMEOUT = 2.0
CONFIRM_TRIES = 5  # a replica ending publishes its tally again at most this often
CONFIRM_PAUSE = 0.5

Lives = dict[str, set[int]]  # publisher life -> stream sequences received from it
Received = dict[int, Lives]  # parent replica -> its lives


def ranges(seqs: set[int]) -> list[list[int]]:
    """``{1, 2, 3, 7}`` as ``[[1, 3], [7, 7]]``: compact for the mostly contiguous case."""
    out: list[list[int]] = []
    for seq in sorted(seqs):
        if out and out[-1][1] == seq - 1:
            out[-1][1] = seq
        else:
            out.append([seq, seq])
    return out


def from_ranges(spans: list[list[int]]) -> set[int]:
    return {seq for low, high in spans for seq in range(low, high + 1)}


def size(received: Received) -> int:
    """How many stream sequences a tally holds, over every parent replica and life."""
    return sum(len(seqs) for lives in received.values() for seqs in lives.values())


def encode(received: Received, *, exact: bool) -> bytes:
    body = {
        "exact": exact,
        "received": {
            str(replica): {life: ranges(seqs) for life, seqs in sorted(lives.items())}
            for replica, lives in sorted(received.items())
        },
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def decode(data: bytes) -> tuple[bool, Received]:
    """(exact, received) of a sibling's tally; ValueError when it is not one."""
    body: Any = json.loads(data)
    if not isinstance(body, dict) or not isinstance(body.get("received"), dict):
        raise ValueError("not a tally")
    received: Received = {
        int(replica): {str(life): from_ranges(spans) for life, spans in lives.items()}
        for replica, lives in body["received"].items()
    }
    return body.get("exact") is True, received


class TallyLost(Exception):
    """The broker took a tally but does not keep it as the subject's last (EOS-8)."""


class Doubt(NamedTuple):
    """Why a marker's count is not taken yet, whether a quiet wait settles it (rather than
    a loss), and how many messages were received (what the wait watches)."""

    problem: str
    waitable: bool
    received: int


def judge(lives: Lives, *, claimed: int, life: str, who: str) -> Doubt | None:
    """A marker from ``life`` claiming ``claimed`` messages, against what ``who`` received
    from that parent replica (by publisher life); None when it adds up (EOS-6).

    A marker from a life that sent nothing, while another life sent data, is what a
    publisher restarted with nothing left to do writes (and what a forger writes): a
    quiet wait settles it. A publisher that sent from several lives counts its own
    life only, which cannot be compared.
    """
    received = sum(len(seqs) for seqs in lives.values())
    others = set(lives) - {life}
    if others and life in lives:
        return None
    if others:
        why = f"its marker is from a life that sent nothing, another sent {received}"
        return Doubt(why, True, received)
    if received == claimed:
        return None
    why = f"its marker says {claimed} message(s), {who} received {received}"
    return Doubt(why, False, received)


@dataclass
class Pooled:
    """The union of the siblings' tallies for one parent, or why there is none."""

    received: Received = field(default_factory=dict)
    inexact: bool = False  # a sibling is a restarted life: counts cannot be checked
    unreadable: bool = False  # a sibling's tally could not be read just now


class GenerationSuperseded(Exception):
    """This replica's run was superseded: vf-provision capped its parent stream (PROV-6),
    which has no room for what the replica must write there (ADR 0244)."""

    code = "VF_GENERATION_SUPERSEDED"

    def render(self) -> str:
        return (
            f"error[{self.code}] {self}\n  = fix: nothing, if the newer run is the one to keep: "
            "remove this run's workloads (vf teardown --superseded reclaims its streams); to "
            "run this one instead, provision it again (its provision Job, or vf-provision), "
            "which gives its streams their share back"
        )


class SharedTally:
    """This replica's tallies for each parent, published for its siblings, and theirs."""

    def __init__(
        self, js: JetStreamContext, *, names: RunNames, child: str, replica: int, replicas: int
    ) -> None:
        self.js = js
        self.names = names
        self.child = child
        self.replica = replica
        self.replicas = replicas
        self.exact: dict[str, bool] = {}
        self.sent: dict[str, bytes] = {}

    def subject(self, parent: str, replica: int) -> str:
        return f"{self.names.eos_prefix(parent)}.tally.{token(self.child)}.r{replica}"

    async def _last_msg(self, parent: str, replica: int) -> RawStreamMsg | None:
        """The message last kept on ``replica``'s tally subject; None when there is none."""
        stream = self.names.stream(parent)
        subject = self.subject(parent, replica)
        try:
            return await asyncio.wait_for(
                self.js.get_last_msg(stream, subject), timeout=LOOKUP_TIMEOUT
            )
        except NotFoundError:
            return None

    async def _last(self, parent: str, replica: int) -> bytes | None:
        """The latest tally of sibling ``replica``; None when it has published none."""
        raw = await self._last_msg(parent, replica)
        return None if raw is None else raw.data or b""

    async def start(self, parent: str) -> bool:
        """Publish this life's first tally; False when an earlier life of this replica
        had published one (then this life's counts are not exact). The look for an earlier
        tally is asked again while a busy broker cannot answer, as the durable's was."""
        earlier = await patiently(
            lambda: self._last(parent, self.replica),
            what=f"the earlier tally of {self.child} on {parent}",
        )
        exact = earlier is None
        self.exact[parent] = exact
        try:
            await self.publish(parent, {})
        except TallyLost as exc:  # the first check publishes it again
            log.warning("the opening tally is not kept yet: %s", exc)
        except APIError as exc:
            if not broker_full(exc):
                raise
            await self._no_room(parent, exc, exact=exact)
        return exact

    async def _no_room(self, parent: str, exc: APIError, *, exact: bool) -> None:
        """The parent's stream refused the opening tally for want of room (ADR 0244)."""
        stream = self.names.stream(parent)
        if exact:  # no tally says the same: nothing received, exact
            log.info("no room in %s for the opening tally; the first check publishes it", stream)
            return
        info = await patiently(lambda: self.js.stream_info(stream), what=f"stream {stream}")
        who = f"'{self.child}' replica {self.replica}"
        if CAPPED_KEY in (info.config.metadata or {}):
            raise GenerationSuperseded(
                f"{who}: stream {stream} was capped at {info.config.max_bytes} bytes by "
                "vf-provision as superseded (PROV-6), a newer run or generation of the flow "
                "was provisioned, and it has no room for this restarted replica's tally "
                f"(EOS-8: {exc.err_code} {exc.description}); this replica stops, its inputs "
                "left in the stream"
            ) from exc
        raise BrokerError(
            "VF_BROKER_FULL",
            f"{who}: stream {stream} is full and refused this restarted replica's tally, "
            f"which its siblings need to check end-of-stream counts (EOS-8: {exc.err_code} "
            f"{exc.description}); nothing was taken from it",
            "let the stream's readers catch up (its supervisor starts this replica again), "
            "or give the broker a larger volume (broker.storage_size)",
        ) from exc

    async def publish(self, parent: str, received: Received) -> None:
        """Publish this replica's tally for ``parent`` when it changed since the last one,
        then remove the older ones; raise TallyLost when the broker does not keep it last.

        The purge names the new tally's sequence: it removes what is older, and nothing a
        broker applying requests late could make it remove of this one (a purge that keeps
        the last message would). The tally is read back: its siblings read the last one
        on the subject, and a count they cannot see fails their check of the marker."""
        data = encode(received, exact=self.exact.get(parent, False))
        if self.sent.get(parent) == data:
            return
        subject = self.subject(parent, self.replica)
        ack = await self.js.publish(subject, data)
        await self.js.purge_stream(ack.stream, subject=subject, seq=ack.seq)
        await self._kept(parent, ack.seq)
        self.sent[parent] = data

    async def _kept(self, parent: str, seq: int) -> None:
        """Raise TallyLost unless this replica's last tally for ``parent`` is at ``seq``."""
        raw = await self._last_msg(parent, self.replica)
        if raw is None or raw.seq != seq:
            self.sent.pop(parent, None)
            found = "none" if raw is None else f"sequence {raw.seq}"
            subject = self.subject(parent, self.replica)
            raise TallyLost(f"{subject}: stored at sequence {seq}, the last kept is {found}")

    async def confirm(self, parent: str, received: Received) -> None:
        """Before this replica ends: its last tally for ``parent`` is ``received``, kept
        last on its subject (published again until it is, while the broker answers)."""
        for _ in range(CONFIRM_TRIES):
            try:
                stored = await self._last(parent, self.replica)
                data = encode(received, exact=self.exact.get(parent, False))
                if stored == data:
                    return
                log.warning(
                    "the tally for %s is not the last kept (kept: %s, this replica's: %d): "
                    "published again",
                    parent,
                    _counted(stored),
                    size(received),
                )
                self.sent.pop(parent, None)
                await self.publish(parent, received)
            except Exception as exc:  # a broker not answering: this replica's work is done
                log.warning("tally for %s not confirmed yet: %s", parent, exc)
                await asyncio.sleep(CONFIRM_PAUSE)
        log.error("the tally for %s could not be confirmed: its siblings may wait", parent)

    async def pooled(self, parent: str, own: Received) -> Pooled:
        """``own`` merged with every sibling's latest tally for ``parent``."""
        pooled = Pooled(inexact=not self.exact.get(parent, False))
        _merge(pooled.received, own)
        for replica in range(self.replicas):
            if replica == self.replica:
                continue
            try:
                data = await self._last(parent, replica)
                if data is None:
                    continue  # not started yet: it has received nothing
                exact, received = decode(data)
            except (ValueError, TypeError) as exc:
                log.error("tally of %s replica %d unreadable: %s", self.child, replica, exc)
                pooled.unreadable = True
                continue
            except Exception as exc:  # the broker did not answer: ask again next poll
                log.debug("tally lookup of replica %d failed: %s", replica, exc)
                pooled.unreadable = True
                continue
            pooled.inexact |= not exact
            _merge(pooled.received, received)
        return pooled


def _counted(data: bytes | None) -> str:
    """How many sequences a stored tally holds, for a log line."""
    if data is None:
        return "none"
    try:
        _, received = decode(data)
    except (ValueError, TypeError):
        return "unreadable"
    return str(size(received))


def _merge(into: Received, received: Received) -> None:
    for replica, lives in received.items():
        mine = into.setdefault(replica, {})
        for life, seqs in lives.items():
            mine.setdefault(life, set()).update(seqs)
