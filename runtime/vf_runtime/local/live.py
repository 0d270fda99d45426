"""``vf run-local --live``: a per-node table read from the workers' ``/metrics`` (LOCAL-4).

Every table gives, per node: the messages processed so far (every replica, every life),
the rate since the last table, the 50th and 95th percentile of ``vf_process_seconds``
over the same interval, interpolated within a bucket as Prometheus' ``histogram_quantile``
does (ADR 0233), the dead letters, and the backlog the node's replicas last saw. Nothing
here does I/O: the supervisor scrapes, this module reads and formats.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

LABEL_TEXT = r'(?:[^"\\]|\\.)*'  # a label value's text inside its quotes, escapes and all
_VALUE = f'"({LABEL_TEXT})"'
_HEAD = rf"\{{flow={_VALUE},node={_VALUE},replica=\"\d+\""
BUCKET = re.compile(rf'^vf_process_seconds_bucket{_HEAD},le="([^"]+)"\}} (\d+)$', re.MULTILINE)
BACKLOG = re.compile(
    rf"^vf_backlog_messages{_HEAD},parent={_VALUE},durable={_VALUE}\}} (\d+)$", re.MULTILINE
)
Buckets = tuple[tuple[float, int], ...]  # (upper bound, cumulative count), +Inf last


@dataclass(frozen=True)
class Sample:
    """What one scrape of one replica tells the table besides its counters."""

    buckets: Buckets = ()
    backlog: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (parent, durable)


@dataclass(frozen=True)
class Replica:
    """One replica as the supervisor saw it: its counters over every life, and its last
    scrape (None: nothing answered)."""

    label: str
    node: str
    counts: Mapping[str, int]
    sample: Sample | None


def parse(text: str, node: str) -> Sample | None:
    """The process-time buckets and backlog of node ``node`` in ``text`` (a worker's
    ``/metrics``); None when it holds no histogram of that node."""
    label = node.replace("\\", "\\\\").replace('"', '\\"')
    buckets = tuple(
        (float(le), int(count)) for _, owner, le, count in BUCKET.findall(text) if owner == label
    )
    if not buckets:
        return None
    backlog = {
        (_unquoted(parent), _unquoted(durable)): int(count)
        for _, owner, parent, durable, count in BACKLOG.findall(text)
        if owner == label
    }
    return Sample(buckets=buckets, backlog=backlog)


def _unquoted(value: str) -> str:
    """A label value of the text format, its escapes undone."""
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """The ``q`` quantile of cumulative ``buckets``, as PromQL's ``histogram_quantile``:
    NaN without a +Inf bucket or observations; within a bucket, linear between its lower
    bound (0 for the first) and its upper one; in the +Inf bucket, the highest finite bound."""
    if not 0 <= q <= 1:
        return math.copysign(math.inf, q)
    cumulative = _cumulative(buckets)
    if cumulative is None:
        return math.nan
    bounds, counts = cumulative
    rank = q * counts[-1]
    b = next((i for i in range(len(bounds) - 1) if counts[i] >= rank), len(bounds) - 1)
    if b == len(bounds) - 1 or (b == 0 and bounds[0] <= 0):
        return bounds[-2] if b else bounds[0]
    start, count = 0.0, counts[b]
    if b > 0:
        start, count, rank = bounds[b - 1], count - counts[b - 1], rank - counts[b - 1]
    # q = 0 over an empty first bucket: PromQL's 0/0
    return start + (bounds[b] - start) * (rank / count) if count else math.nan


def _cumulative(buckets: Sequence[tuple[float, float]]) -> tuple[list[float], list[float]] | None:
    """The bounds in order and their counts, the same bound's added up and each at least
    the one before; None without a +Inf bucket, a finite one, or an observation."""
    merged: dict[float, float] = {}
    for bound, count in buckets:
        merged[bound] = merged.get(bound, 0.0) + count
    bounds = sorted(merged)
    if len(bounds) < 2 or bounds[-1] != math.inf:
        return None
    counts: list[float] = []
    for bound in bounds:  # a count below the one before it is read as the one before
        counts.append(max(merged[bound], counts[-1] if counts else 0.0))
    return (bounds, counts) if counts[-1] > 0 else None


def increase(before: Sample | None, after: Sample) -> Buckets:
    """``after``'s buckets less ``before``'s; ``after`` whole when the replica restarted
    in between (a count went down, or the bounds changed), as Prometheus reads a reset."""
    if before is None or [b for b, _ in before.buckets] != [b for b, _ in after.buckets]:
        return after.buckets
    pairs = zip(before.buckets, after.buckets, strict=True)
    if any(new < old for (_, old), (_, new) in pairs):
        return after.buckets
    return tuple(
        (b, new - old) for (b, old), (_, new) in zip(before.buckets, after.buckets, strict=True)
    )


def _duration(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    return f"{seconds * 1000:.3g}ms" if seconds < 1 else f"{seconds:.3g}s"


@dataclass
class LiveView:
    """The tables of one run: what the last table saw, to give rates and intervals."""

    started: float
    processed: dict[str, int] = field(default_factory=dict)  # by node, at the last table
    samples: dict[str, Sample] = field(default_factory=dict)  # by replica label
    at: float | None = None

    def table(self, replicas: Sequence[Replica], now: float) -> list[str]:
        """The lines of one table: a ``live`` header, then a row per node in order."""
        elapsed = max(now - (self.started if self.at is None else self.at), 1e-9)
        nodes: dict[str, list[Replica]] = {}
        for replica in replicas:
            nodes.setdefault(replica.node, []).append(replica)
        rows = [self._row(node, members, elapsed) for node, members in nodes.items()]
        self.at = now
        width = max([len("node"), *(len(node) for node in nodes)])
        titles = ("processed", "rate/s", "p50", "p95", "dead", "backlog")
        lines = [f"live  {'node':<{width}}" + "".join(f"  {t:>9}" for t in titles)]
        for node, cells in zip(nodes, rows, strict=True):
            lines.append(f"      {node:<{width}}" + "".join(f"  {c:>9}" for c in cells))
        return lines

    def _row(self, node: str, members: Sequence[Replica], elapsed: float) -> tuple[str, ...]:
        processed = sum(r.counts.get("processed", 0) for r in members)
        rate = max(processed - self.processed.get(node, 0), 0) / elapsed
        self.processed[node] = processed
        interval: dict[float, int] = {}
        backlog: dict[tuple[str, str], int] = {}
        for replica in members:
            if replica.sample is None:
                continue
            for bound, count in increase(self.samples.get(replica.label), replica.sample):
                interval[bound] = interval.get(bound, 0) + count
            self.samples[replica.label] = replica.sample
            for key, count in replica.sample.backlog.items():  # replicas share a durable
                backlog[key] = max(backlog.get(key, 0), count)
        buckets = sorted(interval.items())
        return (
            str(processed),
            f"{rate:.1f}",
            _duration(histogram_quantile(0.5, buckets)),
            _duration(histogram_quantile(0.95, buckets)),
            str(sum(r.counts.get("dead_lettered", 0) for r in members)),
            str(sum(backlog.values())) if backlog else "-",
        )
