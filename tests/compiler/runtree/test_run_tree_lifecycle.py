"""What a GitOps controller puts a flow through, proven on the committed tree with
``vf run-tree``'s cluster: first sync, a changed BATCH flow delivered by Argo CD, Flux,
``helm upgrade`` and ``kubectl apply`` (new Jobs beside the old ones), a REALTIME rollout,
a changed graph beside the old run, two flows in one namespace, and deletion. Real
nats-server and Redis-compatible store, started from the tree's own manifests."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import REPO
from vf.runtree.cluster import Cluster
from vf.runtree.command import RunTreeRequest, prepare, workloads_done
from vf.runtree.controllers import JobController
from vf.runtree.outcome import worker_auth
from vf.runtree.podhost import ClusterOptions
from vf.runtree.sync import sync

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

FLOWS = REPO / "tests" / "runtree_flows"
NAMESPACE = "lifecycle"
COUNT = 20


def _path() -> str:
    return os.pathsep.join(
        [str(REPO / ".tools" / "bin"), str(Path(sys.executable).parent), os.environ["PATH"]]
    )


def compile_tree(graph: str, tree: Path, *, config: Path | None = None, **env: str) -> Path:
    command = [sys.executable, "-m", "vf", "compile", str(FLOWS / graph), "--out", str(tree)]
    if config is not None:
        command += ["--config", str(config)]
    variables = {
        **os.environ,
        "PATH": _path(),
        **{f"VF_TEST_{k.upper()}": v for k, v in env.items()},
    }
    done = subprocess.run(command, capture_output=True, text=True, env=variables, check=False)
    assert done.returncode == 0, done.stderr
    return tree


def config(tmp: Path, *, image: str = "1", extra: str = "", broker: str = "{profile: dev}") -> Path:
    path = tmp / f"vf-{image}.yaml"
    path.write_text(
        "environments:\n  dev:\n    namespace: lifecycle\n    images:\n"
        f"      default: registry.example.com/vf/tree-tests:{image}\n"
        f"    broker: {broker}\n    payload_store: {{profile: dev}}\n"
        "    mounts: {sink: ['results:/results']}\n" + extra
    )
    return path


def apply(cluster: Cluster, tree: Path, *, app: str, mode: str, renderer: str) -> list[str]:
    request = RunTreeRequest(tree=tree, env="dev", renderer=renderer, app=FLOWS)
    rendered, resolver = prepare(request, log=print)
    return sync(cluster, rendered, resolver, mode=mode, app=app, timeout=60)


def results(cluster: Cluster, name: str) -> Path:
    """Where the sink's claim ``results`` (mounted at /results) keeps ``name``."""
    return cluster.options.run_dir / "claims" / NAMESPACE / "results" / name


def applied(path: Path, *, tag: str | None = None) -> Counter[int]:
    """How many times each item was applied at the sink (one line per application)."""
    if not path.exists():
        return Counter()
    items = [json.loads(line) for line in path.read_text().splitlines()]
    return Counter(i["i"] for i in items if tag is None or i.get("tag") == tag)


def report(label: str, seen: Counter[int], expected: int) -> tuple[int, int, int]:
    delivered = len(seen)
    duplicated = sum(n - 1 for n in seen.values())
    lost = expected - len(set(seen) & set(range(1, expected + 1)))
    print(f"{label}: delivered {delivered}, duplicated {duplicated}, lost {lost}")
    return delivered, duplicated, lost


def finish(cluster: Cluster, *, timeout: float = 90) -> None:
    assert cluster.run_until(lambda: workloads_done(cluster, batch=True), timeout=timeout)
    failed = [c.name for c in cluster.controllers.values() if c.status == "Failed"]
    assert not failed, failed


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    monkeypatch.setenv("PATH", _path())  # the renderers: kubectl, and helm from scripts/setup
    options = ClusterOptions(run_dir=tmp_path / "cluster", backoff_base=0.5, grace_cap=10)
    made = Cluster(options)
    yield made
    made.shutdown(timeout=20)
    assert made.idle()


@pytest.mark.parametrize("renderer", ["kustomize", "helm"])
def test_first_sync_delivers_everything_once_and_deletion_leaves_nothing(
    cluster: Cluster, tmp_path: Path, renderer: str
) -> None:
    sink = results(cluster, "sink.jsonl")
    tree = compile_tree(
        "batch.py", tmp_path / "tree", out="/results/sink.jsonl", count=str(COUNT), tag="a"
    )
    assert apply(cluster, tree, app="batch", mode="kubectl", renderer=renderer) == []
    finish(cluster)
    assert report(f"first sync ({renderer})", applied(sink), COUNT) == (COUNT, 0, 0)
    nats = next(p for p in cluster.pods() if p.labels.get("vf.dev/infra") == "nats")
    store = nats.scratch
    assert store is not None and any(store.rglob("*"))  # JetStream kept its streams there
    cluster.delete_app("batch", by_waves=False)
    assert cluster.idle() and not cluster.pods() and not cluster.objects
    assert all(c.process is None or c.process.returncode is not None for c in nats.containers)
    assert not store.exists()  # the dev broker's state went with its pod


def _jobs(cluster: Cluster) -> set[str]:
    return {k[2] for k in cluster.objects if k[0] == "Job"}


@pytest.mark.parametrize(
    ("mode", "renderer"),
    [("argocd", "kustomize"), ("flux", "kustomize"), ("kubectl", "kustomize"), ("helm", "helm")],
)
def test_a_changed_batch_flow_is_new_jobs_beside_the_old_ones_and_processes_everything(
    cluster: Cluster, tmp_path: Path, mode: str, renderer: str
) -> None:
    """A change to a BATCH flow gives every Job a new name (its template tag), so Argo CD,
    Flux, ``helm upgrade`` and ``kubectl apply`` create new Jobs instead of changing an
    immutable pod template; the tools that prune then remove the old ones."""
    sink = results(cluster, "sink.jsonl")
    first = dict(out="/results/sink.jsonl", count=str(COUNT), interval="0.1", tag="a")
    tree = compile_tree("batch.py", tmp_path / "tree", **first)
    assert apply(cluster, tree, app="batch", mode=mode, renderer=renderer) == []
    finish(cluster)
    before = _jobs(cluster)
    compile_tree("batch.py", tree, **{**first, "tag": "b"})  # the change a pull request makes
    assert apply(cluster, tree, app="batch", mode=mode, renderer=renderer) == []
    finish(cluster)
    after = _jobs(cluster)
    print(f"{mode}: Jobs before {sorted(before)}, after {sorted(after)}")
    assert not cluster.recreated or mode in ("argocd", "helm")  # only hooks are re-created
    if mode == "kubectl":  # `kubectl apply -k` without --prune leaves the finished Jobs
        assert before < after
    else:
        assert before and after and not before & after
    assert report(f"incarnation 1 ({mode})", applied(sink, tag="a"), COUNT) == (COUNT, 0, 0)
    assert report(f"incarnation 2 ({mode})", applied(sink, tag="b"), COUNT) == (COUNT, 0, 0)


def test_a_realtime_rollout_keeps_data_moving(cluster: Cluster, tmp_path: Path) -> None:
    sink = results(cluster, "sink.jsonl")
    tree = compile_tree(
        "live.py", tmp_path / "tree", config=config(tmp_path), out="/results/sink.jsonl"
    )
    assert apply(cluster, tree, app="live", mode="argocd", renderer="kustomize") == []
    assert cluster.run_until(lambda: workloads_done(cluster, batch=False), timeout=60)
    assert cluster.run_until(lambda: sum(applied(sink).values()) > 20, timeout=30)
    compile_tree("live.py", tree, config=config(tmp_path, image="2"), out="/results/sink.jsonl")
    samples: list[tuple[float, int]] = []
    rolling = threading.Event()

    def sample() -> None:  # reads the sink's file only; the cluster stays on this thread
        while not rolling.is_set():
            samples.append((time.monotonic(), sum(applied(sink).values())))
            time.sleep(0.25)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        assert apply(cluster, tree, app="live", mode="argocd", renderer="kustomize") == []
        assert cluster.run_until(lambda: _rolled_to(cluster, "tree-tests:2"), timeout=90)
        cluster.run_until(lambda: False, timeout=2)
    finally:
        rolling.set()
        sampler.join()
    new_pods = [p.name for p in cluster.pods() if p.labels.get("vf.dev/node")]
    longest = _longest_stall(samples)
    print(
        f"rollout: {samples[-1][1] - samples[0][1]} applied in "
        f"{samples[-1][0] - samples[0][0]:.1f}s while every worker was replaced "
        f"({len(new_pods)} new pods); longest stall {longest:.2f}s"
    )
    assert samples[-1][1] > samples[0][1] and longest < 5.0


def _rolled_to(cluster: Cluster, image: str) -> bool:
    workers = [p for p in cluster.pods() if p.labels.get("vf.dev/node")]
    return workloads_done(cluster, batch=False) and all(
        image in c.launch.image.image for p in workers for c in p.containers
    )


def _longest_stall(samples: list[tuple[float, int]]) -> float:
    longest, since = 0.0, samples[0][0]
    for (_, n0), (t1, n1) in itertools.pairwise(samples):
        if n1 > n0:
            since = t1
        longest = max(longest, t1 - since)
    return longest


def _streams(cluster: Cluster, flow: str = "tree-batch") -> list[str]:
    import nats

    port = cluster.books[NAMESPACE].entries[(f"vf-{flow}-nats.{NAMESPACE}.svc", 4222)]

    auth = worker_auth(cluster, flow)  # the flow's broker asks for its credentials
    options = auth.options() if auth is not None else {}

    async def names() -> list[str]:
        client = await nats.connect(
            f"nats://127.0.0.1:{port}", connect_timeout=5, allow_reconnect=False, **options
        )
        try:
            return [s.config.name or "" for s in await client.jetstream().streams_info()]
        finally:
            await client.close()

    return asyncio.run(names())


@pytest.mark.parametrize("reclaim", [False, True])
def test_a_changed_graph_starts_a_new_run_beside_the_old_one(
    cluster: Cluster, tmp_path: Path, reclaim: bool
) -> None:
    """With ``broker.reclaim_superseded`` the new run's provision Job deletes the old,
    finished run's streams (PROV-5); without it they stay for an operator."""
    sink = results(cluster, "sink.jsonl")
    broker = "{profile: dev, reclaim_superseded: true}" if reclaim else "{profile: dev}"
    settings = config(tmp_path, broker=broker)
    tree = compile_tree(
        "batch.py",
        tmp_path / "tree",
        config=settings,
        out="/results/sink.jsonl",
        count=str(COUNT),
        tag="a",
    )
    assert apply(cluster, tree, app="batch", mode="argocd", renderer="kustomize") == []
    finish(cluster)
    old_run = next(o for o in cluster.objects.values() if o["kind"] == "Job")["metadata"]["labels"][
        "vf.dev/run"
    ]
    assert any(old_run in s for s in _streams(cluster))
    compile_tree(
        "batch.py",
        tree,
        config=settings,
        out="/results/sink.jsonl",
        count=str(COUNT),
        tag="b",
        extra="1",
    )
    assert apply(cluster, tree, app="batch", mode="argocd", renderer="kustomize") == []
    finish(cluster)
    jobs = [c for c in cluster.controllers.values() if isinstance(c, JobController)]
    assert jobs and all(old_run not in j.name for j in jobs)  # the old run's Jobs were pruned
    assert report("old run", applied(sink, tag="a"), COUNT) == (COUNT, 0, 0)
    assert report("new run", applied(sink, tag="b"), COUNT) == (COUNT, 0, 0)
    left = [s for s in _streams(cluster) if old_run in s]
    print(f"reclaim {reclaim}: old run's streams beside the new run: {left}")
    # PROV-3/5: another run's streams are deleted only on opt-in; either way the new run
    # read none of them (no item of tag a reached the new sink twice).
    assert bool(left) is not reclaim


def test_two_flows_in_one_namespace_run_side_by_side_and_prune_apart(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Each flow has its own broker, store, ConfigMaps and policies: deleting one flow's
    Application leaves the other's broker running with its streams."""
    sinks = {name: results(cluster, f"{name}.jsonl") for name in ("flow-a", "flow-b")}
    for name in sinks:
        tree = compile_tree(
            "batch.py",
            tmp_path / name,
            out=f"/results/{name}.jsonl",
            count=str(COUNT),
            tag=name,
            flow=name,
        )
        assert apply(cluster, tree, app=name, mode="argocd", renderer="kustomize") == []
    finish(cluster)
    for name, sink in sinks.items():
        assert report(name, applied(sink, tag=name), COUNT) == (COUNT, 0, 0)
    owned = Counter(cluster.owner.values())
    cluster.delete_app("flow-b", by_waves=True)
    brokers = [p for p in cluster.pods() if p.labels.get("vf.dev/infra") == "nats"]
    streams = _streams(cluster, "flow-a")
    print(
        f"objects per flow {dict(owned)}; after deleting flow-b: brokers "
        f"{[p.name for p in brokers]}, flow-a streams {len(streams)}"
    )
    assert owned["flow-a"] == owned["flow-b"]  # nothing of one flow was taken over by the other
    assert [p.labels.get("vf.dev/flow") for p in brokers] == ["flow-a"] and brokers[0].ready
    assert streams


def test_deleting_a_running_flow_at_once_stops_every_process_promptly(
    cluster: Cluster, tmp_path: Path
) -> None:
    """``kubectl delete -k`` removes the broker and the workers together: a worker must
    not spend its grace period on lookups a gone broker never answers."""
    tree = compile_tree(
        "live.py", tmp_path / "tree", config=config(tmp_path), out="/results/s.jsonl"
    )
    assert apply(cluster, tree, app="live", mode="kubectl", renderer="kustomize") == []
    assert cluster.run_until(lambda: workloads_done(cluster, batch=False), timeout=60)
    workers = [p for p in cluster.pods() if p.labels.get("vf.dev/node")]
    started = time.monotonic()
    cluster.delete_app("live", by_waves=False, timeout=40)
    took = time.monotonic() - started
    codes = [c.exit_code for p in workers for c in p.containers]
    print(f"delete of {len(workers)} workers and the broker took {took:.1f}s, exits {codes}")
    assert cluster.idle()
    assert all(code == 0 for code in codes)  # none was killed at the end of its grace
    logs = [c.log.read_text() for p in workers for c in p.containers]
    assert not any("stop grace" in text for text in logs)  # each stopped by itself (STOP-6)
