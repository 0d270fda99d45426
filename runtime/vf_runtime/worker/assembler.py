"""Trace joins: one group per trace id, complete when every parent contributed.

Pure bookkeeping (no I/O): the worker feeds deliveries in and acts on what comes
out. Timeouts use a monotonic clock; ``missing='wait'`` groups never time out and
are never evicted for space (the broker's credit bounds them instead).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from vf_runtime.policies import JoinPolicy

T = TypeVar("T")


@dataclass
class Group(Generic[T]):
    """The inputs gathered for one trace id, by parent name."""

    trace_id: str
    opened: float
    items: dict[str, T] = field(default_factory=dict)


@dataclass
class Outcome(Generic[T]):
    """What one ``add`` produced: groups to process, groups to give up, stale duplicates."""

    complete: list[Group[T]] = field(default_factory=list)
    evicted: list[Group[T]] = field(default_factory=list)
    superseded: list[T] = field(default_factory=list)


class TraceAssembler(Generic[T]):
    """Groups inputs by trace id across ``parents`` under ``policy``."""

    def __init__(
        self,
        parents: tuple[str, ...],
        policy: JoinPolicy,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.parents = parents
        self.policy = policy
        self.clock = clock
        self.open: dict[str, Group[T]] = {}

    def add(self, item: T, *, parent: str, trace_id: str) -> Outcome[T]:
        """Record ``item``; a second copy from the same parent replaces the first."""
        outcome: Outcome[T] = Outcome()
        group = self.open.get(trace_id)
        if group is None:
            group = Group(trace_id=trace_id, opened=self.clock())
            self.open[trace_id] = group
        previous = group.items.get(parent)
        if previous is not None:
            outcome.superseded.append(previous)
        group.items[parent] = item
        if all(p in group.items for p in self.parents):
            outcome.complete.append(self.open.pop(trace_id))
        elif self.policy.missing != "wait":
            while len(self.open) > self.policy.max_pending:
                oldest = next(iter(self.open))
                outcome.evicted.append(self.open.pop(oldest))
        return outcome

    def expire(self) -> list[Group[T]]:
        """Groups open longer than the policy's timeout, removed from the assembler."""
        timeout = self.policy.timeout_seconds
        if timeout is None:
            return []
        limit = self.clock() - timeout
        stale = [trace for trace, group in self.open.items() if group.opened <= limit]
        return [self.open.pop(trace) for trace in stale]

    def held(self, parent: str) -> int:
        """How many inputs from ``parent`` wait in open groups."""
        return sum(1 for group in self.open.values() if parent in group.items)

    def take_all(self) -> list[Group[T]]:
        """Every open group (at end of stream), removed from the assembler."""
        groups = list(self.open.values())
        self.open.clear()
        return groups
