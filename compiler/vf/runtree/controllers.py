"""The parts of the Job, Deployment and StatefulSet controllers a flow depends on.

Each controller owns the pods of one workload object and is advanced by the cluster's
loop: it creates pods from the current template, replaces them as the workload's rules
say, rolls out template changes with the declared strategy, and reports the status a
cluster would report (``Complete``/``Failed`` for Jobs, ready replicas otherwise).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vf.runtree.pods import Pod
from vf.textio.objects import Obj

JOB_BACKOFF_CAP = 360.0
MakePod = Callable[..., Pod]


def template_hash(obj: Obj) -> str:
    """A digest of the pod template: what decides whether pods are current."""
    text = json.dumps((obj.get("spec") or {}).get("template"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _scaled(value: Any, replicas: int, *, up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        raw = replicas * float(value[:-1]) / 100
        return math.ceil(raw) if up else math.floor(raw)
    return int(value)


@dataclass
class Controller:
    """Common state: the object, its pods and the events it reported."""

    obj: Obj
    make_pod: MakePod
    pods: list[Pod] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    status: str = "Progressing"

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def spec(self) -> Obj:
        spec: Obj = self.obj.get("spec") or {}
        return spec

    def update(self, obj: Obj) -> None:
        self.obj = obj

    def live(self) -> list[Pod]:
        return [p for p in self.pods if p.terminating_since is None]

    def reap(self) -> None:
        kept = []
        for pod in self.pods:
            if pod.terminating_since is not None and pod.gone:
                pod.remove()
            else:
                kept.append(pod)
        self.pods = kept

    def stop(self, now: float) -> None:
        for pod in self.pods:
            pod.terminate(now)

    @property
    def replicas(self) -> int:
        return int(self.spec.get("replicas", 1))

    def ready_current(self) -> int:
        """Ready pods made from the current template."""
        current = template_hash(self.obj)
        return sum(1 for p in self.live() if p.revision == current and p.ready)

    def advance(self, now: float) -> str:
        """Forget pods that are gone, advance the others; the current template's hash."""
        self.reap()
        for pod in self.pods:
            pod.tick(now)
        return template_hash(self.obj)

    def healthy(self) -> bool:
        raise NotImplementedError

    def tick(self, now: float) -> None:
        raise NotImplementedError


@dataclass
class JobController(Controller):
    """A Job: NonIndexed or Indexed completions, parallelism, backoffLimit, pod back-off."""

    succeeded: set[int] = field(default_factory=set)
    successes: int = 0
    failures: int = 0
    retry_at: float = 0.0
    counted: set[int] = field(default_factory=set)
    last_failure: str = ""

    @property
    def indexed(self) -> bool:
        return self.spec.get("completionMode") == "Indexed"

    @property
    def completions(self) -> int:
        return int(self.spec.get("completions") or 1)

    def healthy(self) -> bool:
        return self.status == "Complete"

    def tick(self, now: float) -> None:
        self.reap()
        if self.status in ("Complete", "Failed"):
            return
        for pod in list(self.pods):
            pod.tick(now)
            if id(pod) in self.counted or pod.phase not in ("Succeeded", "Failed"):
                self._count_restarts(pod)
                continue
            self.counted.add(id(pod))
            if pod.phase == "Succeeded":
                self.successes += 1
                self.succeeded.add(pod.index or 0)
            else:
                self._failed(now, pod)
        self._finish(now)
        if self.status == "Progressing" and now >= self.retry_at:
            self._start_pods()

    def _count_restarts(self, pod: Pod) -> None:
        # OnFailure restarts the container in place; each restart counts toward backoffLimit.
        extra = pod.restarts - getattr(pod, "_counted_restarts", 0)
        if extra > 0:
            self.failures += extra
            pod._counted_restarts = pod.restarts  # type: ignore[attr-defined]

    def _failed(self, now: float, pod: Pod) -> None:
        self.failures += 1
        container = pod.failed_container()
        what = container.exit_text() if container else "exit ?"
        self.events.append(f"pod {pod.name} failed ({what})")
        self.last_failure = what
        delay = min(pod.backoff_base * 2 ** (self.failures - 1), JOB_BACKOFF_CAP)
        self.retry_at = now + delay

    def _finish(self, now: float) -> None:
        limit = int(self.spec.get("backoffLimit", 6))
        if self.failures > limit:
            self.status = "Failed"
            last = f"; last: {self.last_failure}" if self.last_failure else ""
            self.events.append(f"failed: BackoffLimitExceeded ({self.failures} failures{last})")
            self._stop_active(now)
            return
        done = (
            len(self.succeeded) >= self.completions
            if self.indexed
            else self.successes >= self.completions
        )
        if done:
            self.status = "Complete"
            self._stop_active(now)

    def _stop_active(self, now: float) -> None:
        # A finished Job terminates its active pods; finished pods stay until it is deleted.
        for pod in self.pods:
            if pod.phase not in ("Succeeded", "Failed"):
                pod.terminate(now)

    def _start_pods(self) -> None:
        parallelism = int(self.spec.get("parallelism", 1))
        running = [p for p in self.live() if p.phase in ("Pending", "Running")]
        busy = {p.index for p in running}
        if self.indexed:
            pending = [
                i for i in range(self.completions) if i not in self.succeeded and i not in busy
            ]
        else:
            left = self.completions - self.successes - len(running)
            pending = [None] * max(0, left)  # type: ignore[list-item]
        for index in pending[: max(0, parallelism - len(running))]:
            self.pods.append(self.make_pod(self, index=index))


@dataclass
class DeploymentController(Controller):
    """A Deployment: replicas, Recreate or RollingUpdate (maxSurge/maxUnavailable)."""

    def healthy(self) -> bool:
        current = template_hash(self.obj)
        return self.ready_current() >= self.replicas and all(
            p.revision == current for p in self.pods
        )

    def tick(self, now: float) -> None:
        current = self.advance(now)
        new = [p for p in self.live() if p.revision == current]
        old = [p for p in self.live() if p.revision != current]
        strategy = self.spec.get("strategy") or {}
        if strategy.get("type") == "Recreate":
            if old or any(p.revision != current for p in self.pods):
                for pod in old:
                    pod.terminate(now)
                return
            self._scale(new, now, self.replicas)
        else:
            self._roll(new, old, now, strategy.get("rollingUpdate") or {})
        self.status = "Available" if self.healthy() else "Progressing"

    def _scale(self, new: list[Pod], now: float, want: int) -> None:
        for _ in range(want - len(new)):
            self.pods.append(self.make_pod(self, index=None))
        for pod in sorted(new, key=lambda p: p.ready)[: max(0, len(new) - want)]:
            pod.terminate(now)

    def _roll(self, new: list[Pod], old: list[Pod], now: float, rules: Obj) -> None:
        surge = _scaled(rules.get("maxSurge", "25%"), self.replicas, up=True)
        unavailable = _scaled(rules.get("maxUnavailable", "25%"), self.replicas, up=False)
        if not old:
            self._scale(new, now, self.replicas)
            return
        room = self.replicas + max(surge, 0 if unavailable else 1) - len(new) - len(old)
        for _ in range(max(0, min(room, self.replicas - len(new)))):
            self.pods.append(self.make_pod(self, index=None))
        available = sum(p.ready for p in new + old)
        floor = self.replicas - unavailable
        for pod in sorted(old, key=lambda p: p.ready):
            if available - (1 if pod.ready else 0) >= floor or not pod.ready:
                available -= 1 if pod.ready else 0
                pod.terminate(now)


@dataclass
class StatefulSetController(Controller):
    """A StatefulSet: stable ordinals and claims, Parallel/OrderedReady, rolling updates."""

    def healthy(self) -> bool:
        return self.ready_current() >= self.replicas

    def tick(self, now: float) -> None:
        current = self.advance(now)
        ordered = self.spec.get("podManagementPolicy", "OrderedReady") == "OrderedReady"
        present = {p.index: p for p in self.pods}
        for ordinal in range(self.replicas):
            if ordinal in present:
                if ordered and not present[ordinal].ready:
                    break
                continue
            self.pods.append(self.make_pod(self, index=ordinal))
            if ordered:
                break
        for pod in self.live():
            if pod.index is not None and pod.index >= self.replicas:
                pod.terminate(now)
        stale = [p for p in self.live() if p.revision != current]
        if stale and all(p.ready for p in self.live() if p.revision == current):
            max(stale, key=lambda p: p.index or 0).terminate(now)
        self.status = "Available" if self.healthy() and not stale else "Progressing"


CONTROLLERS: dict[str, type[Controller]] = {
    "Job": JobController,
    "Deployment": DeploymentController,
    "StatefulSet": StatefulSetController,
}
