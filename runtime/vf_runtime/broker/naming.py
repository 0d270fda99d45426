"""Broker names of a run: streams, subjects, durables, control and dead letters.

This is the one implementation: the compiler's plan asks it for the names it records.
Every token is sanitised the same way (``[^A-Za-z0-9_-]+`` becomes ``_``). A run's
*generation* (one incarnation of its workloads) scopes every run-level name, so two
incarnations of one run never share a stream, a subject, a durable or a stop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_INVALID = re.compile(r"[^A-Za-z0-9_-]+")
GENERATION = re.compile(r"^[A-Za-z0-9_]{1,16}\Z")


def token(text: str) -> str:
    """One subject token or stream-name part."""
    return _INVALID.sub("_", text)


@dataclass(frozen=True)
class RunNames:
    """Name factory for one generation of one run of one flow.

    ``generation`` is empty for a run that has a single generation (REALTIME plans):
    its names are then exactly the run's.
    """

    flow_id: str
    run_id: str
    generation: str = ""

    @property
    def _f(self) -> str:
        return token(self.flow_id)

    @property
    def _r(self) -> str:
        """The run's part of stream names: the run id, then the generation when there is one."""
        run = token(self.run_id)
        return f"{run}-{self.generation}" if self.generation else run

    @property
    def _rs(self) -> str:
        """The run's part of subjects: one token for the run, one for the generation."""
        run = token(self.run_id)
        return f"{run}.{self.generation}" if self.generation else run

    def stream(self, node: str) -> str:
        """The stream holding a node's output (data and end-of-stream markers)."""
        return f"vf-{self._f}-{self._r}-{token(node)}"

    def subject(self, node: str) -> str:
        """The data subject a node publishes on."""
        return f"vf.{self._f}.{self._rs}.{token(node)}"

    def eos_prefix(self, node: str) -> str:
        """The end-of-stream subject root; each replica publishes below it."""
        return f"{self.subject(node)}._eos"

    def eos_subject(self, node: str, *, replica: int) -> str:
        """Replica ``replica``'s own end-of-stream subject (one retained marker each)."""
        return f"{self.eos_prefix(node)}.r{replica}"

    def durable(self, child: str, *, parent: str, partition: int | None = None) -> str:
        """The durable ``child`` reads ``parent`` through; one per replica when partitioned."""
        base = f"{token(child)}--from--{token(parent)}"
        return base if partition is None else f"{base}--p{partition}"

    def eos_anchor(self, node: str) -> str:
        """A never-fetched durable that keeps end-of-stream markers retained under interest."""
        return f"{token(node)}--eos--anchor"

    def slot_bucket(self) -> str:
        """The key-value bucket where replicas without an ordinal of their own lease one."""
        return f"vf-{self._f}-{self._r}-slots"

    def control(self) -> str:
        """Plain-NATS subject on which a stop for the whole run is announced."""
        return f"vf.{self._f}.{self._rs}._control.stop"

    def stop_payload(self) -> bytes:
        """The only bytes on :meth:`control` that stop this generation of the run (STOP-5)."""
        return f"stop {self.flow_id} {self.run_id} {self.generation or '-'}".encode()

    def dlq_stream(self) -> str:
        """The flow's dead-letter stream; shared by runs and never deleted with one."""
        return f"vf-{self._f}-dlq"

    def dlq_subjects(self) -> str:
        return f"vf.{self._f}._dlq.>"

    def dlq_run_subjects(self) -> str:
        """Every dead letter of this run's generation (its nodes' and refused controls')."""
        return f"vf.{self._f}._dlq.{self._rs}.>"

    def dlq_control_subject(self) -> str:
        """Where refused control messages are kept (STOP-5); not items, so not a node's."""
        return f"vf.{self._f}._dlq.{self._rs}._control"

    def dlq_subject(self, node: str) -> str:
        return f"vf.{self._f}._dlq.{self._rs}.{token(node)}"


def valid_generation(text: str) -> bool:
    """A generation is 1-16 letters, digits or underscores (it becomes a subject token)."""
    return bool(GENERATION.match(text))
