"""A worker's health endpoints and Prometheus metrics, served from a daemon thread.

``/readyz`` is 200 once the node's ``open()`` returned; ``/healthz`` is 200 while
the worker loop has beaten within the stall bound and no node call has run past its
bound (503 ``hung`` once one has, and ``/readyz`` 503 too); ``/metrics`` is Prometheus
text; anything else is 404.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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
# Retries that delay messages without spending their delivery budget.
RETRIES = ("publish", "store", "broker_full")  # broker_full: VF_BROKER_FULL, within publish


@dataclass
class Metrics:
    """Counters of one worker; plain ints are safe to bump from the event loop."""

    node: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    retries: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RETRIES, 0))
    proc_count: int = 0
    proc_seconds: float = 0.0
    ready: bool = False
    cpu_at_ready: float = 0.0
    last_beat: float = field(default_factory=time.monotonic)
    hung: str | None = None  # why the replica is hung: a node call ran past its bound

    def hang(self, reason: str) -> None:
        """A node call ran past its bound: liveness fails from now on (DELIV-12)."""
        self.hung = reason

    def bump(self, name: str, amount: int = 1) -> None:
        self.counts[name] += amount

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
        self.proc_count += 1
        self.proc_seconds += seconds

    def beat(self) -> None:
        self.last_beat = time.monotonic()

    def alive(self) -> bool:
        return self.hung is None and time.monotonic() - self.last_beat < STALL_SECONDS

    def render(self) -> str:
        label = '{node="' + self.node.replace("\\", "\\\\").replace('"', '\\"') + '"}'
        lines = []
        for name in COUNTERS:
            metric = f"vf_messages_{name}_total"
            lines += [f"# TYPE {metric} counter", f"{metric}{label} {self.counts[name]}"]
        for name in RETRIES:
            metric = f"vf_{name}_retries_total"
            lines += [f"# TYPE {metric} counter", f"{metric}{label} {self.retries[name]}"]
        lines += [
            "# TYPE vf_processing_seconds summary",
            f"vf_processing_seconds_count{label} {self.proc_count}",
            f"vf_processing_seconds_sum{label} {self.proc_seconds:.6f}",
        ]
        return "\n".join(lines) + "\n"


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
