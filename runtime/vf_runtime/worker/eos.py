"""End of stream on the receiving side: which parent replicas have finished (EOS-2…8).

Markers are read from the parents' streams with last-message lookups. A marker is taken
only when it is this run's (EOS-7) and, where the reader can count, when its count
matches what was received (EOS-6, pooled across competing replicas by EOS-8). An abort is
a marker like any other for those checks, and more: once one of this run's aborts was
seen, taken or not, the replica ends aborted (EOS-5), never in a success.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from vf_runtime.broker.headers import stored_headers
from vf_runtime.wire import ABORT, EOS, Envelope, ErrorInfo, WireError, decode_envelope
from vf_runtime.worker.config import WorkerConfig
from vf_runtime.worker.inputs import Inputs
from vf_runtime.worker.outputs import EXACT_HEADER, GENERATION_HEADER, LIFE_HEADER

log = logging.getLogger("vf.worker")
EOS_LOOKUP_TIMEOUT = 2.0  # one marker lookup; the next poll asks again


class EosMismatch(Exception):
    """A parent replica's marker states a count this replica never received (EOS-6)."""

    code = "VF_EOS_MISMATCH"

    def __init__(self, message: str, *, parent_replica: str) -> None:
        super().__init__(message)
        self.parent_replica = parent_replica  # "<parent>.r<i>"


@dataclass
class Abort:
    """An abort of this run seen on a parent replica's end-of-stream subject (EOS-5)."""

    parent: str
    replica: int
    envelope: Envelope
    raw: bytes  # the marker as stored, kept with the replica's dead-letter record
    taken: bool = False  # it ended that parent replica's input (else a later marker did)
    problem: str = ""  # why its count was not taken when it was seen (EOS-6)

    def error(self) -> ErrorInfo:
        """The error to relay: the originating one, or one saying that none was given."""
        if self.envelope.error is not None:
            return self.envelope.error
        return ErrorInfo(
            code="VF_UPSTREAM_ABORTED",
            message=f"'{self.parent}' replica {self.replica} aborted without a reason",
            node=self.parent,
        )

    def reason(self) -> str:
        """What the replica's dead-letter record says: whose abort, whether its count was
        taken, then its own error (the part its sender wrote comes last)."""
        error = self.error()
        origin = f"abort of '{self.parent}' replica {self.replica}"
        if not self.taken:
            problem = self.problem or "its count did not add up"
            origin += (
                f", refused as its end of stream ({problem}) and replaced by a later marker: "
                "forged, or items were lost"
            )
        return f"{origin}: {error.code}: {error.message}"


class EndOfStream:
    """Which parent replicas have published their terminator; read from the streams.

    A marker is taken only when it is this run's (EOS-7) and, where ``inputs`` can
    count exactly, when its count matches what was received (EOS-6).
    """

    def __init__(
        self,
        js: JetStreamContext,
        *,
        config: WorkerConfig,
        inputs: Inputs | None = None,
        bound: float | None = None,
    ) -> None:
        self.js = js
        self.bound = config.eos_wait_seconds if bound is None else bound
        self.config = config
        self.names = config.names
        self.inputs = inputs
        self.stopping: Callable[[], bool] = lambda: False
        self.missing = {
            (parent, replica)
            for parent in config.parents
            for replica in range(config.parent_replicas.get(parent, 1))
        }
        self.aborts: dict[tuple[str, int], Abort] = {}  # the first of each parent replica
        self.refused: set[tuple[str, int, int]] = set()  # (parent, replica, stream seq) logged
        # parent replica -> (its problem, the count received, since when that count stands)
        self.mismatched: dict[tuple[str, int], tuple[str, int, float]] = {}
        self.doubtful: set[tuple[str, int]] = set()  # mismatches a quiet wait settles

    @property
    def done(self) -> bool:
        return not self.missing

    @property
    def aborted(self) -> Abort | None:
        """The abort this replica ends on: the first parent replica's, in input order."""
        return self.aborts[min(self.aborts)] if self.aborts else None

    def check_mismatch(self) -> None:
        """Raise when a marker's count has been contradicted, with nothing arriving from
        that replica, for the bound (the caller checks its inputs drained)."""
        now = time.monotonic()
        for (parent, replica), (problem, _, since) in sorted(self.mismatched.items()):
            doubtful = (parent, replica) in self.doubtful
            if (parent, replica) in self.missing and not doubtful and now - since >= self.bound:
                raise EosMismatch(
                    f"'{self.config.node_name}' replica {self.config.replica_id}: the end of "
                    f"stream of '{parent}' replica {replica} does not add up ({problem}) "
                    f"after waiting {self.bound:g}s; items were lost or the marker is not "
                    "genuine",
                    parent_replica=f"{parent}.r{replica}",
                )

    def _identity_problem(
        self, envelope: Envelope, headers: dict[str, str], key: tuple[str, int]
    ) -> str | None:
        config = self.config
        parent, replica = key
        if envelope.type not in (EOS, ABORT):
            return f"it is a {envelope.type} message, not an end-of-stream or abort marker"
        if (envelope.flow_id, envelope.run_id) != (config.flow_id, config.run_id):
            return f"it belongs to flow {envelope.flow_id!r} run {envelope.run_id!r}"
        if envelope.producer != parent or envelope.replica_id != replica:
            return f"it names {envelope.producer!r} replica {envelope.replica_id}"
        generation = headers.get(GENERATION_HEADER, "")
        if config.generation and generation != config.generation:
            return f"it is from generation {generation or '(none)'!r}"
        return None

    async def _count_matches(
        self, envelope: Envelope, headers: dict[str, str], key: tuple[str, int]
    ) -> bool:
        if self.inputs is None or headers.get(EXACT_HEADER) == "0":
            return True  # a publisher whose publishes were ambiguous cannot count exactly
        life = headers.get(LIFE_HEADER, "")
        found = await self.inputs.count_problem(key[0], key[1], claimed=envelope.seq, life=life)
        if found is None:
            self.mismatched.pop(key, None)
            return True
        problem, doubtful, total = found
        last = self.mismatched.get(key)
        since = last[2] if last is not None and last[1] == total else time.monotonic()
        self.mismatched[key] = (problem, total, since)
        if doubtful:
            self.doubtful.add(key)
            if time.monotonic() - since >= self.bound:  # quiet long enough: the life is over
                log.warning("end of stream of %s replica %d taken after a wait: %s", *key, problem)
                return True
        return False

    async def _accepted(
        self, envelope: Envelope, headers: dict[str, str], key: tuple[str, int], seq: int
    ) -> bool:
        problem = self._identity_problem(envelope, headers, key)
        if problem is None:
            return await self._count_matches(envelope, headers, key)
        if (key[0], key[1], seq) not in self.refused:
            self.refused.add((key[0], key[1], seq))
            log.error("end-of-stream marker of %s replica %d refused: %s", *key, problem)
        return False

    async def poll(self) -> None:
        """Look up the last marker of every parent replica still missing one."""
        for parent, replica in sorted(self.missing):
            if self.stopping():  # a stop must not wait on lookups a gone broker never answers
                return
            stream = self.names.stream(parent)
            subject = self.names.eos_subject(parent, replica=replica)
            try:
                raw = await asyncio.wait_for(
                    self.js.get_last_msg(stream, subject), timeout=EOS_LOOKUP_TIMEOUT
                )
            except NotFoundError:
                continue
            except Exception as exc:
                log.debug("end-of-stream lookup on %s failed: %s", subject, exc)
                continue
            try:
                envelope = decode_envelope(raw.data or b"")
            except WireError as exc:
                log.error("undecodable terminator on %s ignored: %s", subject, exc)
                continue
            key, headers = (parent, replica), stored_headers(raw)
            taken = await self._accepted(envelope, headers, key, raw.seq or 0)
            if envelope.type == ABORT and self._identity_problem(envelope, headers, key) is None:
                self._saw_abort(envelope, key, raw=raw.data or b"", taken=taken)
            if not taken:
                continue
            self.missing.discard(key)
            log.info("end of stream from %s replica %d", parent, replica)

    def _saw_abort(
        self, envelope: Envelope, key: tuple[str, int], *, raw: bytes, taken: bool
    ) -> None:
        """Keep the first abort of this run seen from ``key``: taken now or not, it is the
        replica's outcome (EOS-5). One refused for its count keeps why (EOS-6)."""
        seen = self.aborts.get(key)
        if seen is None:
            problem = "" if taken else self._problem(key)
            seen = self.aborts[key] = Abort(*key, envelope=envelope, raw=raw, problem=problem)
            error = seen.error()
            log.error(
                "abort of %s replica %d seen (%s: %s)%s; this replica ends aborted",
                *key,
                error.code,
                error.message,
                "" if taken else f", not taken yet: {seen.problem}",
            )
        if taken and envelope == seen.envelope:
            seen.taken = True

    def _problem(self, key: tuple[str, int]) -> str:
        found = self.mismatched.get(key)
        return found[0] if found is not None else "its count could not be checked yet"


async def record_loss(js: JetStreamContext, config: WorkerConfig, exc: EosMismatch) -> None:
    """Keep a lost-items verdict in the dead-letter stream (EOS-6): a restarted life
    cannot count again, so without this record the loss would end in a success."""
    headers = {
        "Nats-Msg-Id": f"dlq:eos:{config.node_name}:r{config.replica_id}:{exc.parent_replica}",
        "VF-Origin-Node": config.node_name,
        "VF-Run-Id": config.run_id,
        "VF-Generation": config.generation,
        "VF-Code": exc.code,
        "VF-Error": str(exc),
        "VF-Disposition": "lost",
    }
    subject = config.names.dlq_subject(config.node_name)
    try:
        await js.publish(subject, b"", timeout=5.0, headers=headers)
    except Exception as error:  # the exit code still says the replica failed
        log.error("could not record the loss in the dead-letter stream: %s", error)


async def record_abort(
    js: JetStreamContext, config: WorkerConfig, abort: Abort, reason: str
) -> None:
    """Keep a replica's abort in the dead-letter stream (EOS-5), with the marker's bytes:
    the run's report names the node and the upstream error, and a restarted life, which
    cannot tell what this one received, cannot turn it into a success."""
    generation = config.generation
    scope = f"{config.run_id}.{generation}" if generation else config.run_id
    headers = {
        "Nats-Msg-Id": f"dlq:abort:{config.flow_id}:{scope}:{config.node_name}:"
        f"r{config.replica_id}",
        "VF-Origin-Node": config.node_name,
        "VF-Origin-Stream": config.names.stream(abort.parent),
        "VF-Run-Id": config.run_id,
        "VF-Generation": generation,
        "VF-Code": "VF_UPSTREAM_ABORTED",
        "VF-Error": reason[:256],
        "VF-Disposition": "aborted",
    }
    subject = config.names.dlq_subject(config.node_name)
    try:
        await js.publish(subject, abort.raw, timeout=5.0, headers=headers)
    except Exception as error:  # the exit code still says the replica aborted
        log.error("could not record the abort in the dead-letter stream: %s", error)
