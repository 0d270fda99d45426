"""A worker's health endpoints and Prometheus metrics, served from a daemon thread.

``/readyz`` is 200 once the node's ``open()`` returned; ``/healthz`` is 200 while
the worker loop has beaten within the stall bound and no node call has run past its
bound (503 ``hung`` once one has, and ``/readyz`` 503 too); ``/metrics`` is Prometheus
text; anything else is 404.
"""

from __future__ import annotations

import re
import threading
import time
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from vf_runtime.constants import RETRIES

STALL_SECONDS = 60.0
COUNTERS = (
    "published",
    "received",
    "processed",
    "failed",
    "dead_lettered",
    "skipped",
    "deduplicated",  # republished outputs the stream already had (after a crash, a retry)
    "redelivered",  # inputs received again (a lease ran out, a nak, a crashed sibling)
)
_COUNTER_HELP = {
    "published": "Outputs published to the node's stream.",
    "received": "Inputs received from the parents' streams (redeliveries included).",
    "processed": "Items the node finished: its call returned and its output was confirmed.",
    "failed": "Items whose call of the node failed.",
    "dead_lettered": "Items written to the dead-letter stream.",
    "skipped": "Items settled without a call of the node (already applied, not owned).",
    "deduplicated": "Republished outputs the stream already had.",
    "redelivered": "Inputs received more than once.",
}
# Upper bounds in seconds: a millisecond call up to a ten-minute one (HEALTH-3).
PROCESS_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip
# From the producer's timestamp to this node's finishing: ten milliseconds up to an hour.
LATENCY_BUCKETS = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
)  # fmt: skip


class Histogram:
    """A Prometheus histogram: one count per bucket (cumulated when rendered) and a sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: above every bound (+Inf)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # le: the first bound >= value
        self.total += value

    def lines(self, name: str, labels: str) -> list[str]:
        out = []
        seen = 0
        head = labels[:-1] + ","  # '{a="1",' : each bucket adds its le
        for bound, count in zip(self.bounds, self.counts, strict=False):
            seen += count
            out.append(f'{name}_bucket{head}le="{bound:g}"}} {seen}')
        seen += self.counts[-1]
        out.append(f'{name}_bucket{head}le="+Inf"}} {seen}')
        out.append(f"{name}_sum{labels} {self.total:.6f}")
        out.append(f"{name}_count{labels} {seen}")
        return out


def _quoted(value: object) -> str:
    """A label value in the text format: backslash, quote and newline escaped."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return text.replace("\n", "\\n")


_SUMMARY = re.compile(r"summary: (.*)$")


def summary_counts(line: str) -> dict[str, int] | None:
    """The message counters of a worker's summary line (:meth:`Metrics.summary`, its last
    log line); None when ``line`` is no summary."""
    found = _SUMMARY.search(line.rstrip("\n"))
    if found is None:
        return None
    pairs = (field.partition("=") for field in found.group(1).split())
    return {name: int(value) for name, _, value in pairs if name in COUNTERS and value.isdigit()}


@dataclass
class Metrics:
    """Counters of one worker; plain ints are safe to bump from the event loop."""

    node: str
    flow: str = ""
    replica: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    retries: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RETRIES, 0))
    dead_letters: dict[str, int] = field(default_factory=dict)  # by error code
    process: Histogram = field(default_factory=lambda: Histogram(PROCESS_BUCKETS))
    latency: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    # undelivered in each (parent, durable) as of the last message received from it
    backlog: dict[tuple[str, str], int] = field(default_factory=dict)
    in_flight: Callable[[], int] = lambda: 0  # messages held: received, not yet settled
    started: float = field(default_factory=time.time)
    ready: bool = False
    cpu_at_ready: float = 0.0
    last_beat: float = field(default_factory=time.monotonic)
    hung: str | None = None  # why the replica is hung: a node call ran past its bound

    def hang(self, reason: str) -> None:
        """A node call ran past its bound: liveness fails from now on (DELIV-12)."""
        self.hung = reason

    def bump(self, name: str, amount: int = 1) -> None:
        self.counts[name] += amount

    def dead_lettered(self, code: str) -> None:
        self.counts["dead_lettered"] += 1
        self.dead_letters[code] = self.dead_letters.get(code, 0) + 1

    def mark_ready(self) -> None:
        """``open()`` returned: ready, and the CPU the work costs is counted from here."""
        self.ready = True
        self.cpu_at_ready = time.process_time()

    def retried(self, name: str) -> None:
        self.retries[name] += 1

    def summary(self) -> str:
        """One line of every counter, for the worker's last log line."""
        counts = " ".join(f"{name}={value}" for name, value in self.counts.items())
        retries = " ".join(f"{name}_retries={value}" for name, value in self.retries.items())
        cpu = time.process_time() - self.cpu_at_ready
        return f"{counts} {retries} cpu_seconds={cpu:.3f}"

    def observe(self, seconds: float) -> None:
        """One call of the node took ``seconds``."""
        self.process.observe(seconds)

    def arrived(self, seconds: float) -> None:
        """An item finished ``seconds`` after its producer stamped it (``event_ts``)."""
        self.latency.observe(max(seconds, 0.0))  # another pod's clock may run ahead

    def beat(self) -> None:
        self.last_beat = time.monotonic()

    def alive(self) -> bool:
        return self.hung is None and time.monotonic() - self.last_beat < STALL_SECONDS

    def render(self) -> str:
        """The Prometheus text format (version 0.0.4), every series labelled with the
        flow, the node and the replica (HEALTH-3)."""
        label = (
            f'{{flow="{_quoted(self.flow)}",node="{_quoted(self.node)}",replica="{self.replica}"}}'
        )
        head = label[:-1] + ","
        lines = []
        for name in COUNTERS:
            metric = f"vf_messages_{name}_total"
            lines += _family(metric, "counter", _COUNTER_HELP[name])
            lines.append(f"{metric}{label} {self.counts[name]}")
        for name in RETRIES:
            metric = f"vf_{name}_retries_total"
            lines += _family(metric, "counter", f"Attempts that waited out {_WAITED[name]}.")
            lines.append(f"{metric}{label} {self.retries[name]}")
        lines += _family(
            "vf_dead_letters_total", "counter", "Items written to the dead-letter stream, by code."
        )
        for code, count in sorted(self.dead_letters.items()):
            lines.append(f'vf_dead_letters_total{head}code="{_quoted(code)}"}} {count}')
        lines += _family("vf_process_seconds", "histogram", "Time one call of the node took.")
        lines += self.process.lines("vf_process_seconds", label)
        lines += _family(
            "vf_end_to_end_seconds",
            "histogram",
            "Time from the producer's timestamp of an item to this node finishing it.",
        )
        lines += self.latency.lines("vf_end_to_end_seconds", label)
        lines += _family(
            "vf_messages_in_flight", "gauge", "Messages this replica holds, not yet settled."
        )
        lines.append(f"vf_messages_in_flight{label} {self.in_flight()}")
        lines += _family(
            "vf_backlog_messages",
            "gauge",
            "Messages not yet delivered from a parent's durable, as of the last one received.",
        )
        for (parent, durable), count in sorted(self.backlog.items()):
            lines.append(
                f'vf_backlog_messages{head}parent="{_quoted(parent)}",'
                f'durable="{_quoted(durable)}"}} {count}'
            )
        lines += _family(
            "vf_start_time_seconds", "gauge", "When this replica started, in Unix seconds."
        )
        lines.append(f"vf_start_time_seconds{label} {self.started:.3f}")
        return "\n".join(lines) + "\n"


_WAITED = {
    "publish": "an unreachable broker or a full stream",
    "store": "an unreachable or full payload store",
    "broker_full": "a broker out of storage (VF_BROKER_FULL)",
}


def _family(name: str, kind: str, text: str) -> list[str]:
    return [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]


def _handler(metrics: Metrics) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/readyz":
                ok = metrics.ready and metrics.hung is None
                self._send(200 if ok else 503, "ready\n" if ok else "not-ready\n")
            elif self.path == "/healthz":
                ok = metrics.alive()
                word = "ok" if ok else "hung" if metrics.hung is not None else "stalled"
                self._send(200 if ok else 503, word + "\n")
            elif self.path == "/metrics":
                self._send(200, metrics.render(), kind="text/plain; version=0.0.4")
            else:
                self._send(404, "not found\n")

        def _send(self, status: int, body: str, *, kind: str = "text/plain") -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            """Probes every few seconds would drown the worker's log."""

    return Handler


class HealthServer:
    """The HTTP server on ``port`` (0 disables it)."""

    def __init__(self, metrics: Metrics, *, port: int, host: str = "0.0.0.0") -> None:
        self.server: ThreadingHTTPServer | None = None
        if port > 0:
            self.server = ThreadingHTTPServer((host, port), _handler(metrics))
            self.server.daemon_threads = True
            threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
