"""Broker names of a run: streams, subjects, durables, control and dead letters.

The compiler computes the same names in its plan; a test keeps the two in step.
Every token is sanitised the same way (``[^A-Za-z0-9_-]+`` becomes ``_``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_INVALID = re.compile(r"[^A-Za-z0-9_-]+")


def token(text: str) -> str:
    """One subject token or stream-name part."""
    return _INVALID.sub("_", text)


@dataclass(frozen=True)
class RunNames:
    """Name factory for one run of one flow."""

    flow_id: str
    run_id: str

    @property
    def _f(self) -> str:
        return token(self.flow_id)

    @property
    def _r(self) -> str:
        return token(self.run_id)

    def stream(self, node: str) -> str:
        """The stream holding a node's output (data and end-of-stream markers)."""
        return f"vf-{self._f}-{self._r}-{token(node)}"

    def subject(self, node: str) -> str:
        """The data subject a node publishes on."""
        return f"vf.{self._f}.{self._r}.{token(node)}"

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

    def control(self) -> str:
        """Plain-NATS subject on which a stop for the whole run is announced."""
        return f"vf.{self._f}.{self._r}._control.stop"

    def dlq_stream(self) -> str:
        """The flow's dead-letter stream; shared by runs and never deleted with one."""
        return f"vf-{self._f}-dlq"

    def dlq_subjects(self) -> str:
        return f"vf.{self._f}._dlq.>"

    def dlq_subject(self, node: str) -> str:
        return f"vf.{self._f}._dlq.{self._r}.{token(node)}"
