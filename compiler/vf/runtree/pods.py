"""A pod's life on this machine: its processes, restarts, probes and termination."""

from __future__ import annotations

import http.client
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vf.runtree.podspec import ContainerLaunch
from vf.runtree.runtime import ContainerRuntime, ProcessRuntime, Running, StartRefused
from vf.textio.objects import Obj

RESTART_CAP = 300.0
DEFAULT_GRACE = 30.0


@dataclass
class Probe:
    """One probe of one container (readiness, startup or liveness)."""

    kind: str
    spec: Obj
    local_ports: dict[str, int]
    started: float
    successes: int = 0
    failures: int = 0
    next_at: float = 0.0
    passed: bool = False
    wrap: Callable[[Sequence[str]], list[str]] = list  # where an exec probe's command runs

    def due(self, now: float) -> bool:
        delay = float(self.spec.get("initialDelaySeconds", 0))
        return now >= max(self.next_at, self.started + delay)

    def run(self, now: float) -> bool:
        self.next_at = now + float(self.spec.get("periodSeconds", 10))
        ok = check(self.spec, self.local_ports, wrap=self.wrap)
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            if self.successes >= int(self.spec.get("successThreshold", 1)):
                self.passed = True
        else:
            self.successes, self.failures = 0, self.failures + 1
            if self.failures >= int(self.spec.get("failureThreshold", 3)):
                self.passed = False
        return ok


def _port(spec: Obj, ports: dict[str, int]) -> int | None:
    return ports.get(str(spec.get("port")))


def _http(spec: Obj, ports: dict[str, int], timeout: float) -> bool:
    port = _port(spec, ports)
    if port is None:
        return False
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", spec.get("path", "/"))
        return 200 <= conn.getresponse().status < 400
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def _tcp(spec: Obj, ports: dict[str, int], timeout: float) -> bool:
    port = _port(spec, ports)
    if port is None:
        return False
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def _exec(spec: Obj, timeout: float, wrap: Callable[[Sequence[str]], list[str]]) -> bool:
    try:
        argv = wrap([str(a) for a in spec["command"]])
        done = subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def check(
    spec: Obj, ports: dict[str, int], *, wrap: Callable[[Sequence[str]], list[str]] = list
) -> bool:
    """Run an httpGet / tcpSocket / exec probe against the pod's local ports."""
    timeout = float(spec.get("timeoutSeconds", 1))
    if "httpGet" in spec:
        return _http(spec["httpGet"], ports, timeout)
    if "tcpSocket" in spec:
        return _tcp(spec["tcpSocket"], ports, timeout)
    if "exec" in spec:
        return _exec(spec["exec"], timeout, wrap)
    return True


@dataclass
class Container:
    """One container's runs and history inside a pod."""

    launch: ContainerLaunch
    log: Path
    runtime: ContainerRuntime = field(default_factory=ProcessRuntime)
    handle: Running | None = None
    exit_code: int | None = None
    reason: str | None = None  # why the last run ended: Completed, Error, OOMKilled, ...
    message: str = ""  # what explains the reason (``memory limit 64Mi``)
    restarts: int = 0
    restart_at: float | None = None
    started_at: float = 0.0
    probes: dict[str, Probe] = field(default_factory=dict)
    probe_specs: dict[str, Obj] = field(default_factory=dict)

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The local process of the current run (``podman run`` for a container)."""
        return self.handle.process if self.handle is not None else None

    def start(self, now: float) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.exit_code, self.reason, self.message, self.handle = None, None, "", None
        with self.log.open("ab") as out:
            out.write(f"--- start {self.launch.argv!r}\n".encode())
            out.flush()
            try:
                self.handle = self.runtime.start(self.launch, log=out, attempt=self.restarts)
            except StartRefused as exc:
                out.write(f"{exc.reason}: {exc.message}\n".encode())
                self.exit_code, self.reason, self.message = 128, exc.reason, exc.message
                return
            except OSError as exc:
                out.write(f"cannot start: {exc}\n".encode())
                self.exit_code, self.reason = 128, "StartError"
                return
        self.started_at, self.restart_at = now, None
        local = {k: v for k, v in self.launch.ports.items()}
        wrap = self.handle.exec_argv
        self.probes = {
            k: Probe(k, spec, local, now, wrap=wrap) for k, spec in self.probe_specs.items()
        }

    def poll(self) -> int | None:
        if self.handle is not None and self.exit_code is None:
            self.exit_code = self.handle.poll()
            if self.exit_code is not None:
                self.reason, self.message = self.handle.finish()
                if self.reason not in ("Completed", "Error"):
                    with self.log.open("a", encoding="utf-8") as out:
                        out.write(f"--- {self.exit_text()}\n")
        return self.exit_code

    @property
    def running(self) -> bool:
        return self.handle is not None and self.exit_code is None

    def signal(self, sig: int) -> None:
        if self.running and self.handle is not None:
            self.handle.signal(sig)

    def exit_text(self) -> str:
        """``exit N``, with the reason when it is not a plain exit (``OOMKilled``...)."""
        if self.reason in (None, "Completed", "Error"):
            return f"exit {self.exit_code}"
        detail = f"container {self.launch.name}" + (f", {self.message}" if self.message else "")
        return f"{self.reason}: {detail}, exit {self.exit_code}"

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class Pod:
    """A pod: identity, its containers, phase, readiness and termination."""

    name: str
    namespace: str
    owner: tuple[str, str, str]
    labels: dict[str, str]
    restart_policy: str
    containers: list[Container]
    init: list[Container]
    index: int | None = None
    revision: str = ""
    grace: float = DEFAULT_GRACE
    created: float = field(default_factory=time.monotonic)
    terminating_since: float | None = None
    phase: str = "Pending"
    backoff_base: float = 10.0
    scratch: Path | None = None  # emptyDir and ConfigMap folders, removed with the pod
    keep_scratch: bool = False  # kept instead (--run-dir), as the run's record

    def remove(self) -> None:
        """The pod object is gone: its emptyDirs go with it (claims and logs stay), unless
        the run keeps them."""
        if self.scratch is not None and not self.keep_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def tick(self, now: float) -> None:
        """Advance the pod: run init containers in order, then the main containers."""
        if self.phase in ("Succeeded", "Failed") or self.terminating_since is not None:
            self._reap()
            return
        for container in self.init:
            if container.exit_code == 0:
                continue
            if self._step(container, now):
                return
            return
        self.phase = "Running"
        for container in self.containers:
            self._step(container, now)
            if container.running:
                self._probe(container, now)
        codes = [c.poll() for c in self.containers]
        if all(code is not None for code in codes) and not any(
            c.restart_at is not None for c in self.containers
        ):
            self.phase = "Succeeded" if all(code == 0 for code in codes) else "Failed"

    def _step(self, container: Container, now: float) -> bool:
        """Start or restart ``container`` as the restart policy says; True while it runs."""
        if container.handle is None and container.exit_code is None:
            container.start(now)
            return True
        code = container.poll()
        if code is None:
            return True
        if container.restart_at is None and self._restarts(code):
            delay = min(self.backoff_base * 2**container.restarts, RESTART_CAP)
            if now - container.started_at > 600:
                container.restarts = 0
                delay = self.backoff_base
            container.restart_at = now + delay
        if container.restart_at is not None and now >= container.restart_at:
            container.restarts += 1
            container.start(now)
            return True
        if container in self.init and code != 0 and not self._restarts(code):
            self.phase = "Failed"
        return container.restart_at is not None

    def _restarts(self, code: int) -> bool:
        return self.restart_policy == "Always" or (self.restart_policy == "OnFailure" and code != 0)

    def _probe(self, container: Container, now: float) -> None:
        startup = container.probes.get("startupProbe")
        if startup is not None and not startup.passed:
            if startup.due(now):
                startup.run(now)
                if startup.failures >= int(startup.spec.get("failureThreshold", 3)):
                    container.signal(signal.SIGKILL)
            return
        for kind in ("readinessProbe", "livenessProbe"):
            probe = container.probes.get(kind)
            if probe is not None and probe.due(now):
                probe.run(now)
                if kind == "livenessProbe" and probe.failures >= int(
                    probe.spec.get("failureThreshold", 3)
                ):
                    container.signal(signal.SIGKILL)

    @property
    def ready(self) -> bool:
        if self.phase != "Running" or self.terminating_since is not None:
            return False
        for container in self.containers:
            if not container.running:
                return False
            probe = container.probes.get("readinessProbe")
            startup = container.probes.get("startupProbe")
            if startup is not None and not startup.passed:
                return False
            if probe is not None and not probe.passed:
                return False
        return True

    @property
    def restarts(self) -> int:
        return sum(c.restarts for c in self.containers)

    def terminate(self, now: float) -> None:
        if self.terminating_since is None:
            self.terminating_since = now
            for container in self.init + self.containers:
                container.restart_at = None
                container.signal(signal.SIGTERM)

    def _reap(self) -> None:
        if self.terminating_since is None:
            return
        if time.monotonic() - self.terminating_since > self.grace:
            for container in self.init + self.containers:
                container.signal(signal.SIGKILL)
        for container in self.init + self.containers:
            container.poll()

    @property
    def gone(self) -> bool:
        """No process of this pod is left."""
        return all(not c.running for c in self.init + self.containers)

    def kill(self) -> None:
        for container in self.init + self.containers:
            container.signal(signal.SIGKILL)
            if container.handle is not None:
                container.handle.wait(timeout=5)
                container.poll()

    def failed_container(self) -> Container | None:
        for container in self.init + self.containers:
            if container.exit_code not in (None, 0):
                return container
        return None
