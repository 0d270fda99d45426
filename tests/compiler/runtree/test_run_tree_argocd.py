"""``vf run-tree --sync argocd`` prunes and deletes as gitops-engine does (ADR 151): a
prune in the wave of the object it removes unless the object (or the Application) says
``PruneLast``, no later wave once a Job has failed, and an Application's deletion that
spares what says ``Delete=false``, while a deleted Namespace takes everything in it. A
failed operation is retried as Argo CD retries it, each retry leaving out what is in sync
(ADR 214). Real nats-server and Redis-compatible store, started from the tree's own
manifests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compiler.runtree.test_run_tree_lifecycle import (
    _streams,
    applied,
    cluster,  # noqa: F401  (the fixture)
    compile_tree,
    config,
    finish,
    report,
    results,
)
from tests.support import REPO
from vf.runtree.argocd_sync import Retry, delete_application, prune_waves, prunes, retry_of
from vf.runtree.cluster import Cluster
from vf.runtree.command import RunTreeRequest, prepare, workloads_done
from vf.runtree.controllers import JobController
from vf.runtree.outcome import run_status
from vf.runtree.sync import sync
from vf_runtime.local.outcome import exit_code

FLOWS = REPO / "tests" / "runtree_flows"
COUNT = 20
ARGOCD = "gitops:\n  repo_url: https://git.example.com/a/b.git\n  path: deploy\n  argocd: {}\n"
OWNS_NAMESPACE = "    pod_security: {namespace_labels: true}\n"


def _sync(into: Cluster, tree: Path, *, app: str, timeout: float = 60) -> list[str]:
    request = RunTreeRequest(tree=tree, env="dev", app=FLOWS, sync="argocd")
    rendered, resolver = prepare(request, log=print)
    return sync(into, rendered, resolver, mode="argocd", app=app, timeout=timeout)


@pytest.mark.slow
def test_deleting_the_application_that_labels_the_namespace_leaves_the_other_flow(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """flow-a writes the shared Namespace (Pod Security labels); deleting its Application
    must not delete the Namespace, which would take flow-b's broker and store with it."""
    sinks = {name: results(cluster, f"{name}.jsonl") for name in ("flow-a", "flow-b")}
    for name in sinks:
        owns = OWNS_NAMESPACE if name == "flow-a" else ""
        settings = config(tmp_path, extra=owns + ARGOCD)
        tree = compile_tree(
            "batch.py",
            tmp_path / name / "tree",
            config=settings,
            out=f"/results/{name}.jsonl",
            count=str(COUNT),
            tag=name,
            flow=name,
        )
        assert _sync(cluster, tree, app=name) == []
    finish(cluster)
    assert any(k[0] == "Namespace" and cluster.owner[k] == "flow-a" for k in cluster.objects)
    kept = delete_application(cluster, "flow-a")
    brokers = [p for p in cluster.pods() if p.labels.get("vf.dev/infra") == "nats"]
    print(f"kept {kept}; brokers left {[p.name for p in brokers]}")
    assert [k[0] for k in kept] == ["Namespace"]
    assert [p.labels.get("vf.dev/flow") for p in brokers] == ["flow-b"] and brokers[0].ready
    assert _streams(cluster, "flow-b")
    assert report("flow-b", applied(sinks["flow-b"], tag="flow-b"), COUNT) == (COUNT, 0, 0)


PRIORITY = "priority_class: flows-high\n"
OWNS_PRIORITY = "    pods: {priority_class_value: 1000}\n"


@pytest.mark.slow
def test_deleting_the_application_that_creates_the_priority_class_leaves_it(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """flow-a creates the cluster-wide PriorityClass both flows name; deleting its
    Application must not delete it, after which the API server's priority admission would
    refuse every new pod of flow-b."""
    sinks = {name: results(cluster, f"{name}.jsonl") for name in ("flow-a", "flow-b")}
    for name in sinks:
        owns = OWNS_PRIORITY if name == "flow-a" else ""
        settings = config(tmp_path, extra="    " + PRIORITY + owns + ARGOCD)
        tree = compile_tree(
            "batch.py",
            tmp_path / name / "tree",
            config=settings,
            out=f"/results/{name}.jsonl",
            count=str(COUNT),
            tag=name,
            flow=name,
        )
        assert _sync(cluster, tree, app=name) == []
    finish(cluster)
    owned = [k for k in cluster.objects if k[0] == "PriorityClass"]
    assert [cluster.owner[k] for k in owned] == ["flow-a"]
    kept = delete_application(cluster, "flow-a")
    print(f"kept {kept}")
    assert kept == owned and owned[0] in cluster.objects
    assert not any(cluster.owner.get(k) == "flow-a" for k in cluster.objects)
    assert report("flow-b", applied(sinks["flow-b"], tag="flow-b"), COUNT) == (COUNT, 0, 0)


@pytest.mark.slow
def test_a_new_generation_stops_the_running_batch_under_argocd(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A commit that changes a running BATCH flow renames its Jobs. Argo CD prunes the old
    Jobs as the new ones start, as Flux and Helm do: the old batch stops part-way and the
    new one processes everything once; with PruneLast both would run side by side."""
    sink = results(cluster, "sink.jsonl")
    settings = config(tmp_path, extra=ARGOCD)
    first = dict(out="/results/sink.jsonl", count=str(COUNT), interval="1", tag="a")
    tree = compile_tree("batch.py", tmp_path / "tree", config=settings, **first)
    assert _sync(cluster, tree, app="batch", timeout=8) == []  # Running: wave 0 is the batch
    before = _jobs(cluster)
    compile_tree("batch.py", tree, config=settings, **{**first, "tag": "b"})
    assert _sync(cluster, tree, app="batch", timeout=8) == []  # Running: the new batch
    during = _jobs(cluster)
    print(f"Jobs before {sorted(before)}, while the new batch runs {sorted(during)}")
    assert before and during and not before & during  # the old generation is gone
    finish(cluster)
    old = report("old generation", applied(sink, tag="a"), COUNT)
    assert old[0] < COUNT  # stopped part-way
    assert report("new generation", applied(sink, tag="b"), COUNT) == (COUNT, 0, 0)


def _jobs(of: Cluster) -> set[str]:
    return {k[2] for k in of.controllers if k[0] == "Job"}


@pytest.mark.slow  # real servers and a batch: about 15 s
def test_a_retry_runs_the_waves_after_a_failed_provision_job_which_stays_failed(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The provision Job fails at once (wave -1): the operation ends Failed there. Argo
    CD's retry is a new operation that, with ``ApplyOutOfSyncOnly``, leaves out what is in
    sync, the failed Job among them, so the workers' wave runs and delivers the batch
    (workers ensure their own streams). The Job is never applied again: it stays Failed,
    and the run ends as a lost Job (exit 4). Before, no worker ever started."""
    sink = results(cluster, "sink.jsonl")
    tree = compile_tree(
        "batch.py",
        tmp_path / "tree",
        config=config(tmp_path, extra=ARGOCD),
        out="/results/sink.jsonl",
        count=str(COUNT),
        tag="a",
    )
    _failing_provision(tree)
    assert _sync(cluster, tree, app="batch") == []  # the retry Succeeded
    log = capsys.readouterr().out
    print(log)
    assert "argocd: sync Failed: sync failed in wave -1: Job " in log
    assert "retry #1 of 5 in 0.5s (Argo CD waits 10s)" in log  # --backoff 0.5 of 10 s
    assert "argocd: retry #1 Succeeded" in log and "retry #2" not in log
    jobs = [c for c in cluster.controllers.values() if isinstance(c, JobController)]
    provision = [c for c in jobs if "-provision-" in c.name]
    workers = [c for c in jobs if c not in provision]
    assert len(provision) == 1 and len(workers) == 3
    assert cluster.run_until(lambda: all(w.status == "Complete" for w in workers), timeout=90)
    assert report("after the retry", applied(sink, tag="a"), COUNT) == (COUNT, 0, 0)
    assert provision[0].status == "Failed" and provision[0].failures == 1  # one pod, never again
    assert workloads_done(cluster, batch=True)
    status = run_status(cluster, done=True)
    assert status.status == "lost" and status.lost == (provision[0].name,)
    assert exit_code(status.status) == 4


def _failing_provision(tree: Path) -> None:
    """The provision Job fails at its first pod: no pod retry, and a flow type it refuses
    at once (``VF_ENV``), so its failure comes in a second rather than after six back-offs."""
    (path,) = (tree / "overlays" / "dev" / "resources").glob("job-*-provision-*.yaml")
    text = path.read_text()
    changed = text.replace("backoffLimit: 6", "backoffLimit: 0").replace(
        "name: VF_FLOW_TYPE\n          value: batch", "name: VF_FLOW_TYPE\n          value: none"
    )
    assert changed.count("value: none") == 1 and "backoffLimit: 0" in changed
    path.write_text(changed)


def test_retry_follows_argo_cds_defaults_and_the_application() -> None:
    """An automated sync without ``retry`` retries five times, none by hand; each wait is
    ``duration * factor ** n`` from the failure, n counted from 1, capped at maxDuration."""
    automated = {"spec": {"syncPolicy": {"automated": {"prune": True}}}}
    assert retry_of(automated) == Retry(limit=5)
    assert retry_of({"spec": {"syncPolicy": {}}}) == Retry(limit=0)
    assert retry_of(None) == Retry(limit=0)
    off = {"spec": {"syncPolicy": {"automated": {"enabled": False}}}}
    assert retry_of(off).limit == 0
    assert [Retry(limit=5).wait(n) for n in range(1, 6)] == [10, 20, 40, 80, 160]
    given = {"limit": 2, "backoff": {"duration": "30", "factor": 3, "maxDuration": "1m"}}
    written = retry_of({"spec": {"syncPolicy": {"retry": given}}})
    assert written == Retry(limit=2, duration=30, factor=3, max_duration=60)
    assert [written.wait(n) for n in (1, 2)] == [60, 60]


def test_prune_waves_follow_gitops_engine() -> None:
    live = {
        ("Job", "n", "old-worker"): _obj("Job", wave="0"),
        ("Job", "n", "old-provision"): _obj("Job", wave="-1"),
        ("ConfigMap", "n", "old-config"): _obj("ConfigMap", wave="-2", options="PruneLast=true"),
        ("Namespace", "", "n"): _obj("Namespace", wave="-2", options="Prune=false"),
    }
    waves = prune_waves(live, app=None, apply_waves=[-2, -1, 0, 1])
    assert waves == {  # the prune waves (-2, -1, 0) mirrored: created last, pruned first
        -2: [("Job", "n", "old-worker")],
        -1: [("Job", "n", "old-provision")],
        0: [("Namespace", "", "n")],  # a task, skipped when it runs (Prune=false)
        2: [("ConfigMap", "n", "old-config")],  # PruneLast: after the last wave
    }
    assert [k for k in live if not prunes(live[k])] == [("Namespace", "", "n")]
    app = {"spec": {"syncPolicy": {"syncOptions": ["PruneLast=true"]}}}
    assert set(prune_waves(live, app=app, apply_waves=[0])) == {1}


def test_an_object_never_pruned_still_counts_in_the_mirrored_waves() -> None:
    """gitops-engine mirrors the waves of every prune task, a ``Prune=false`` one among
    them: an old Job in wave 0 beside a Namespace of wave -2 that left the tree is pruned
    in wave -2, not 0 (ADR 206)."""
    live = {
        ("Job", "n", "old-worker"): _obj("Job", wave="0"),
        ("Namespace", "", "n"): _obj("Namespace", wave="-2", options="Prune=false,Delete=false"),
    }
    waves = prune_waves(live, app=None, apply_waves=[0])
    assert waves == {-2: [("Job", "n", "old-worker")], 0: [("Namespace", "", "n")]}


def _obj(kind: str, *, wave: str, options: str = "") -> dict[str, object]:
    annotations = {"argocd.argoproj.io/sync-wave": wave}
    if options:
        annotations["argocd.argoproj.io/sync-options"] = options
    return {"kind": kind, "metadata": {"annotations": annotations}}
