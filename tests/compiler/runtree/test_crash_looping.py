"""Which long-running workloads run-tree calls crash-looping at the end of a run: one whose
container ended (restarted, or down), never one whose processes all run while a probe has
not passed yet (a slow answer on a loaded machine, a rollout's new pod still starting)."""

from __future__ import annotations

from dataclasses import dataclass, field

from vf.runtree.outcome import crash_looping


@dataclass
class _Container:
    exit_code: int | None = None


@dataclass
class _Pod:
    ready: bool
    restarts: int = 0
    containers: list[_Container] = field(default_factory=lambda: [_Container()])


@dataclass
class _Workload:
    pods: list[_Pod]
    replicas: int = 1

    def healthy(self) -> bool:
        return sum(p.ready for p in self.pods) >= self.replicas


@dataclass
class _Cluster:
    controllers: dict[tuple[str, str, str], _Workload]


def _found(pod: _Pod) -> tuple[str, ...]:
    cluster = _Cluster({("Deployment", "ns", "vf-store"): _Workload([pod])})
    return crash_looping(cluster, done=True)  # type: ignore[arg-type]


def test_a_running_pod_whose_probe_has_not_passed_is_not_crash_looping() -> None:
    assert _found(_Pod(ready=False)) == ()


def test_a_pod_that_restarted_or_is_down_after_the_flow_was_ready_is() -> None:
    restarted = _found(_Pod(ready=False, restarts=1))
    down = _found(_Pod(ready=False, containers=[_Container(exit_code=1)]))
    assert restarted == ("deployment/vf-store crash-looping (0/1 ready, 1 restarts)",)
    assert down == ("deployment/vf-store crash-looping (0/1 ready, 0 restarts)",)


def test_a_ready_pod_is_not_crash_looping() -> None:
    assert _found(_Pod(ready=True, restarts=1)) == ()
