"""``vf run-tree``'s two runtimes side by side: a worker's start to ready, and a first sync.

*Start to ready.* The REALTIME lifecycle flow (numbers → double (2 replicas) → sink) synced
with ``kubectl apply`` and ready; then every worker pod is deleted at once, and for each
replacement the seconds from the moment its container was started (a ``podman run``, or
the worker's own process) to its first passing readiness probe (the worker's ``/healthz``,
polled every 0.1 s here instead of the tree's period), the broker and store already up.

*First sync.* The BATCH lifecycle flow of 20 items: seconds from the apply to every Job
``Complete`` (broker and store start, provision Job, then the node Jobs).

*Lifecycle suite* (``--suite``): the wall time of
``tests/compiler/runtree/test_run_tree_lifecycle.py`` (process runtime) and of the same
scenarios in ``tests/compiler/runtree/test_run_tree_podman.py``: all but
the deletion of a running flow at once, which the container tests leave out.

Run from a checkout with podman installed: ``python bench/runtree_runtimes.py [--suite]``;
it writes ``bench/results/runtree-runtimes.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.compiler.runtree import test_run_tree_lifecycle as lifecycle  # noqa: E402

from vf.runtree.cluster import Cluster  # noqa: E402
from vf.runtree.command import workloads_done  # noqa: E402
from vf.runtree.podhost import ClusterOptions  # noqa: E402
from vf.runtree.podman_runtime import PodmanRuntime  # noqa: E402

ROUNDS = 3
IMAGE = "registry.example.com/vf/tree-tests:1"
REPLICAS = 4  # numbers, double x2, sink


def _runtime(kind: str) -> PodmanRuntime | None:
    if kind == "process":
        return None
    from vf.containers.build import ensure_pipeline_image
    from vf.containers.engine import find_podman

    podman = find_podman()
    if podman is None:
        raise SystemExit("podman is not installed")
    if not podman.image_exists(IMAGE):
        ensure_pipeline_image(podman, tag=IMAGE, app_dir=lifecycle.FLOWS, log=print)
    return PodmanRuntime(podman)


def _cluster(work: Path, kind: str) -> Cluster:
    options = ClusterOptions(
        run_dir=work / "run", backoff_base=0.5, grace_cap=10, oci=_runtime(kind), log=lambda _: None
    )
    return Cluster(options)


def _fast_probes(cluster: Cluster) -> None:
    for pod in cluster.pods():
        for container in pod.containers:
            for probe in container.probes.values():
                probe.spec = {**probe.spec, "periodSeconds": 0.1, "initialDelaySeconds": 0}


def _ready_times(cluster: Cluster, skip: set[str], deadline: float) -> dict[str, float]:
    """Seconds from container start to ready of each worker pod not in ``skip``."""
    ready: dict[str, float] = {}
    while time.monotonic() < deadline:
        cluster.tick()
        _fast_probes(cluster)
        now = time.monotonic()
        workers = [p for p in cluster.pods() if p.labels.get("vf.dev/node")]
        for pod in workers:
            if pod.name not in skip and pod.ready and pod.name not in ready:
                ready[pod.name] = now - pod.containers[0].started_at
        if workloads_done(cluster, batch=False) and len(ready) >= REPLICAS:
            return ready
        time.sleep(0.02)
    raise SystemExit("the workers did not become ready")


def start_to_ready(work: Path, kind: str) -> list[float]:
    """Every worker pod of the running flow deleted at once: its replacement's start to
    ready, with the broker and store already up (the first pods wait for provisioning)."""
    tree = lifecycle.compile_tree(
        "live.py", work / "tree", config=lifecycle.config(work), out="/results/s.jsonl"
    )
    cluster = _cluster(work, kind)
    try:
        assert (
            lifecycle.apply(cluster, tree, app="live", mode="kubectl", renderer="kustomize") == []
        )
        first = _ready_times(cluster, set(), time.monotonic() + 120)
        now = time.monotonic()
        for pod in cluster.pods():
            if pod.name in first:
                pod.terminate(now)
        return sorted(_ready_times(cluster, set(first), time.monotonic() + 120).values())
    finally:
        cluster.shutdown(timeout=20)


def first_sync(work: Path, kind: str) -> float:
    tree = lifecycle.compile_tree(
        "batch.py", work / "tree", out="/results/sink.jsonl", count="20", tag="a"
    )
    cluster = _cluster(work, kind)
    try:
        started = time.monotonic()
        assert lifecycle.apply(cluster, tree, app="b", mode="kubectl", renderer="kustomize") == []
        assert cluster.run_until(lambda: workloads_done(cluster, batch=True), timeout=120)
        return time.monotonic() - started
    finally:
        cluster.shutdown(timeout=20)


def suite(kind: str) -> float:
    target = (
        ["tests/compiler/runtree/test_run_tree_lifecycle.py", "-k", "not deleting"]
        if kind == "process"
        else ["tests/compiler/runtree/test_run_tree_podman.py", "-k", "in_containers"]
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *target],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(done.stdout[-3000:])
    return time.monotonic() - started


def main() -> None:
    os.environ["PATH"] = lifecycle._path()
    report: dict[str, Any] = {"rounds": ROUNDS}
    for kind in ("process", "podman"):
        ready: list[float] = []
        syncs: list[float] = []
        for _ in range(ROUNDS):
            with tempfile.TemporaryDirectory() as scratch:
                ready += start_to_ready(Path(scratch), kind)
            with tempfile.TemporaryDirectory() as scratch:
                syncs.append(first_sync(Path(scratch), kind))
        report[kind] = {
            "start_to_ready_s": {
                "median": round(statistics.median(ready), 3),
                "max": round(max(ready), 3),
                "pods": len(ready),
            },
            "first_sync_s": {
                "median": round(statistics.median(syncs), 2),
                "all": [round(s, 2) for s in syncs],
            },
        }
        if "--suite" in sys.argv:
            report[kind]["lifecycle_suite_s"] = round(suite(kind), 1)
        print(kind, json.dumps(report[kind]))
    out = REPO / "bench" / "results" / "runtree-runtimes.json"
    out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
