"""Local supervision of worker processes: one per replica, restarted like a Job's pods.

Each child is watched by its own thread (a healthy child never hides a dead
one), its output is streamed with a ``[node/rN]`` prefix, and a crash is retried
with the same budget as the Jobs (3 restarts) and a local backoff (1, 2, 4 s).
When a node is lost, the flow stalls or the user interrupts, a stop is announced
on the control subject every 2 s until every child has exited.
"""

from __future__ import annotations

import _thread
import http.client
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TextIO

from vf_runtime.local.infra import free_port
from vf_runtime.local.live import LABEL_TEXT, LiveView, Replica, parse
from vf_runtime.local.scrape import ScrapeTargets
from vf_runtime.local.zygote import ForkedWorker, Zygote

# a BATCH worker stopped before its work was done; a worker that ended on an abort (EOS-5)
from vf_runtime.worker.exits import EXIT_ABORTED, EXIT_STOPPED
from vf_runtime.worker.health import summary_counts

STOP_REPEAT = 2.0
_ENDED = (0, EXIT_STOPPED, EXIT_ABORTED)  # a life that ended by design: never restarted
_NOT_LOST = (*_ENDED, None)
PROGRESS_EVERY = 5.0
COUNTER = re.compile(
    rf'^vf_messages_(\w+)_total\{{flow="{LABEL_TEXT}",node="({LABEL_TEXT})",'
    r'replica="\d+"\} (\d+)$',
    re.MULTILINE,
)
METRICS_LIMIT = 1 << 20  # a worker's /metrics is a few kilobytes


@dataclass(frozen=True, kw_only=True)
class SupervisionPolicy:
    """How often and how patiently a crashed replica is restarted."""

    max_restarts: int = 3
    backoff: tuple[float, ...] = (1.0, 2.0, 4.0)

    def delay(self, restart: int) -> float:
        return self.backoff[min(restart, len(self.backoff) - 1)] if self.backoff else 0.0


@dataclass(frozen=True, kw_only=True)
class ReplicaSpec:
    """One worker process to run: its node, replica, environment and health port."""

    node: str
    replica: int
    env: Mapping[str, str]
    health_port: int = 0
    command: tuple[str, ...] = (sys.executable, "-m", "vf_runtime.worker.replica")


@dataclass(frozen=True, kw_only=True)
class SuperviseOptions:
    """What the supervisor needs besides the replicas."""

    announce_stop: Callable[[], None]
    policy: SupervisionPolicy = SupervisionPolicy()
    stall_seconds: float | None = 120.0
    grace_seconds: float = 10.0  # after this, a child that ignores the stop gets SIGTERM
    output: TextIO = field(default_factory=lambda: sys.stderr)  # the stream at the call
    group: int | None = None  # the process group workers join (a guardian's); None: own session
    zygote: Zygote | None = None  # forks the workers it serves (in ``group``), instead of exec
    # Whether a stop was asked for: a signal's KeyboardInterrupt that Python swallowed (one
    # raised inside a finalizer or a weakref callback is only printed) still stops the run.
    interrupted: Callable[[], bool] = lambda: False
    targets: ScrapeTargets | None = None  # kept up to date with the live health ports
    live: bool = False  # a per-node table every PROGRESS_EVERY s instead of the progress line


@dataclass
class Outcome:
    """How a supervised run ended: ok, lost, stalled, stopped (before the work was done),
    aborted (a replica ended on an abort from upstream) or interrupted; and which replicas
    died (or, when stopped or aborted, which were); the restarts, in all and per node."""

    status: str
    lost: list[str] = field(default_factory=list)
    restarts: int = 0
    by_node: dict[str, int] = field(default_factory=dict)


class _Child:
    def __init__(self, spec: ReplicaSpec) -> None:
        self.spec = spec
        self.label = f"{spec.node}/r{spec.replica}"
        self.process: subprocess.Popen[str] | ForkedWorker | None = None
        self.done = threading.Event()
        self.exit_code: int | None = None
        self.restarts = 0
        self.counts: dict[str, int] = {}  # this life's counters, as last scraped or summed up
        self.earlier: dict[str, int] = {}  # the ended lives' counters, added up
        self.life = 0
        self.lock = threading.Lock()
        self.port = spec.health_port  # this life's health port (a fresh one each start)

    def observe(self, line: str) -> None:
        """A worker's last log line sums up its counters: the final count of this life, which
        a scrape between its last message and its exit would miss."""
        counts = summary_counts(line)
        if counts is not None:
            with self.lock:
                self.counts = counts

    def end_life(self) -> None:
        with self.lock:
            self.earlier = _added(self.earlier, self.counts)
            self.counts = {}
            self.life += 1

    def total(self, scraped: dict[str, int], life: int) -> dict[str, int]:
        """Every life's counters, with ``scraped`` (read during ``life``) as this life's."""
        with self.lock:
            if scraped and life == self.life:
                self.counts = scraped
            return _added(self.earlier, self.counts)


def _added(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {k: a.get(k, 0) + b.get(k, 0) for k in sorted({*a, *b})}


class Supervisor:
    """Runs the replicas to completion and reports the outcome."""

    def __init__(self, replicas: list[ReplicaSpec], options: SuperviseOptions) -> None:
        self.children = [_Child(spec) for spec in replicas]
        self.options = options
        self.lock = threading.Lock()
        self.targets_lock = threading.Lock()
        self.stopping = threading.Event()
        self.output_gone = False
        self.reported, self.reported_at = 0, time.monotonic()
        self.live = LiveView(started=self.reported_at) if options.live else None

    def emit(self, label: str, line: str) -> None:
        with self.lock:
            try:  # several lines (a live table) are written together
                text = "".join(f"[{label}] {part}\n" for part in line.rstrip().split("\n"))
                self.options.output.write(text)
                self.options.output.flush()
            except (OSError, ValueError):  # whoever read vf's output is gone (`| head`)
                if not self.output_gone:  # stop the run as a Ctrl-C would, once; a
                    self.output_gone = True  # watcher that died here would hang it
                    _thread.interrupt_main()

    def _watch(self, child: _Child) -> None:
        policy = self.options.policy
        while True:
            env = {**os.environ, **child.spec.env}
            if child.spec.health_port > 0:  # chosen now: one chosen earlier may be taken
                child.port = free_port()  # since (an outgoing connection's ephemeral port)
                env["VF_HEALTH_PORT"] = str(child.port)
            self._targets_changed()
            child.process = self._start(child.spec, env)
            assert child.process.stdout is not None
            for line in child.process.stdout:
                child.observe(line)
                self.emit(child.label, line)
            child.process.stdout.close()
            code = child.process.wait()
            child.end_life()
            # an aborted replica is not restarted: its next life would meet the same abort
            ended = code in _ENDED or self.stopping.is_set()
            if ended or child.restarts >= policy.max_restarts:
                child.exit_code = code
                child.done.set()
                self._targets_changed()
                return
            delay = policy.delay(child.restarts)
            child.restarts += 1
            self.emit(
                "vf", f"{child.label} exited with {code}; restart {child.restarts} in {delay:g}s"
            )
            if self.stopping.wait(delay):
                child.exit_code = code
                child.done.set()
                return

    def _targets_changed(self) -> None:
        """Rewrite the scrape targets: the health port of every replica not yet ended."""
        targets = self.options.targets
        if targets is None:
            return
        try:
            with self.targets_lock:
                targets.write(c.port for c in self.children if not c.done.is_set())
        except OSError as exc:  # a Prometheus of the user's misses the change, nothing else
            self.emit("vf", f"could not write the scrape targets {targets.path}: {exc}")

    def _start(
        self, spec: ReplicaSpec, env: dict[str, str]
    ) -> subprocess.Popen[str] | ForkedWorker:
        """The replica's process: forked by the zygote when it serves this one, else fresh."""
        zygote = self.options.zygote
        if zygote is not None and zygote.serves(spec.command, env):
            forked = zygote.spawn(env)
            if forked is not None:
                return forked
        return subprocess.Popen(
            list(spec.command),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            # never vf's group: a Ctrl-C reaches vf, which stops workers in order
            start_new_session=self.options.group is None,
            process_group=self.options.group,
        )

    def progress(self, *, final: bool = False) -> int:
        """Messages moved so far, summed over every replica's metrics (unreachable ones: 0).

        Every few seconds, when something moved, a line gives each node's processed count;
        under ``live``, a table every few seconds whatever moved, and one at the end.
        """
        total = 0
        processed: dict[str, int] = {}
        replicas = []
        for child in self.children:
            # a restarted replica's counters start again at zero: its earlier lives' add up
            life, node = child.life, child.spec.node
            text = fetch(child.port)
            counts = child.total(counters(text, node), life)
            total += sum(counts.values())
            processed[node] = processed.get(node, 0) + counts.get("processed", 0)
            replicas.append(Replica(child.label, node, counts, parse(text, node)))
        due = time.monotonic() - self.reported_at >= PROGRESS_EVERY
        if self.live is not None:
            if due or final:
                self.reported, self.reported_at = total, time.monotonic()
                self.emit("vf", "\n".join(self.live.table(replicas, self.reported_at)))
        elif total != self.reported and due:
            self.reported, self.reported_at = total, time.monotonic()
            self.emit("vf", "progress: " + ", ".join(f"{n} {c}" for n, c in processed.items()))
        return total

    def run(self) -> Outcome:
        for child in self.children:
            threading.Thread(target=self._watch, args=(child,), daemon=True).start()
        try:
            status = self._wait()
        except KeyboardInterrupt:
            status = "interrupted"
        if status != "ok":
            self._stop_all()
        if self.live is not None:
            self.progress(final=True)
        lost = [c.label for c in self.children if c.exit_code not in _NOT_LOST]
        by_node: dict[str, int] = {}
        for child in self.children:
            by_node[child.spec.node] = by_node.get(child.spec.node, 0) + child.restarts
        restarts = sum(by_node.values())
        if status == "ok" and lost:
            status = "lost"
        aborted = [c.label for c in self.children if c.exit_code == EXIT_ABORTED]
        if status == "ok" and aborted:
            status, lost = "aborted", aborted
        stopped = [c.label for c in self.children if c.exit_code == EXIT_STOPPED]
        if status == "ok" and stopped:
            status, lost = "stopped", stopped
        return Outcome(status=status, lost=lost, restarts=restarts, by_node=by_node)

    def _wait(self) -> str:
        last_total, last_change = -1, time.monotonic()
        while True:
            if self.options.interrupted():
                raise KeyboardInterrupt
            if all(c.done.is_set() for c in self.children):
                return "ok"
            if any(c.done.is_set() and c.exit_code not in _NOT_LOST for c in self.children):
                return "lost"
            time.sleep(0.5)
            stall = self.options.stall_seconds
            if stall is None:
                if self.live is not None:
                    self.progress()
                continue
            total = self.progress()
            if total != last_total:
                last_total, last_change = total, time.monotonic()
            elif time.monotonic() - last_change > stall:
                self.emit("vf", f"no progress for {stall:g}s: the flow stalled")
                return "stalled"

    def _stop_all(self) -> None:
        """Announce stop every 2 s until all children exit; escalate to signals if ignored."""
        self.stopping.set()
        started = time.monotonic()
        while not all(c.done.is_set() for c in self.children):
            try:
                self.options.announce_stop()
            except Exception as exc:
                self.emit("vf", f"could not announce stop: {exc}")
            waited = time.monotonic() - started
            for child in self.children:
                process = child.process
                if process is None or process.poll() is not None:
                    continue
                grace = self.options.grace_seconds
                if waited > grace + 5:
                    process.kill()
                elif waited > grace:
                    process.send_signal(signal.SIGTERM)
            for child in self.children:
                child.done.wait(timeout=STOP_REPEAT / len(self.children))


def scrape(port: int, node: str) -> dict[str, int]:
    """Node ``node``'s message counters from the /metrics endpoint on ``port``; empty when
    nothing answers there, or something else does: another process took the port (a NATS
    server answers with a line that is not HTTP), or a worker of another node does. A
    worker is recognised by the node its counters name, never by the port alone."""
    return counters(fetch(port), node)


def fetch(port: int) -> str:
    """The text of the /metrics endpoint on ``port``; empty when nothing answers with it."""
    if port <= 0:
        return ""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=0.5)
    try:
        connection.request("GET", "/metrics")
        response = connection.getresponse()
        if response.status != 200:
            return ""
        return response.read(METRICS_LIMIT).decode("utf-8")
    except (OSError, http.client.HTTPException, ValueError):
        return ""
    finally:
        connection.close()


def counters(text: str, node: str) -> dict[str, int]:
    """Node ``node``'s message counters in ``text``, a worker's /metrics."""
    label = node.replace("\\", "\\\\").replace('"', '\\"')
    return {name: int(value) for name, owner, value in COUNTER.findall(text) if owner == label}
