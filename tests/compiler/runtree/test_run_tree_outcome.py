"""``vf run-tree`` ends a run as ``vf run-local`` does: a flow that set an item aside never
passes, and the two runners give one graph the same exit code and the same words. Real
nats-server and Redis-compatible store, real kubectl, the workers of the worker image."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.support import REPO, require
from vf.runtree.cluster import Cluster
from vf.runtree.command import RunTreeRequest, prepare, workloads_done
from vf.runtree.outcome import dead_letters, run_names, run_status, worker_auth
from vf.runtree.podhost import ClusterOptions
from vf.runtree.sync import sync
from vf_runtime.broker.client import BrokerError, announce_stop
from vf_runtime.broker.naming import RunNames
from vf_runtime.clientauth import NatsAuth
from vf_runtime.local.outcome import exit_code, settled

FLOWS = REPO / "tests" / "runtree_flows"
VF = [sys.executable, "-m", "vf"]
COUNT, REFUSED = 40, 17

pytestmark = pytest.mark.slow


def _path() -> str:
    extra = [str(REPO / ".tools" / "bin"), str(Path(sys.executable).parent)]
    return os.pathsep.join([*extra, os.environ.get("PATH", "")])


def _vf(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    variables = {**os.environ, "PATH": _path(), **env}
    return subprocess.run(
        [*VF, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=variables,
        timeout=300,
        check=False,
    )


def _project(tmp: Path) -> Path:
    """The lifecycle flows, with a sink that refuses one item of ``COUNT``."""
    project = tmp / "app"
    shutil.copytree(FLOWS, project, ignore=shutil.ignore_patterns("__pycache__"))
    return project


FLOW_ENV = {
    "VF_TEST_OUT": "/results/sink.jsonl",
    "VF_TEST_COUNT": str(COUNT),
    "VF_TEST_REFUSE": str(REFUSED),
    "VF_TEST_FLOW": "tree-refuse",
}


def _applied(path: Path) -> list[int]:
    return sorted(json.loads(line)["i"] for line in path.read_text().splitlines() if line)


def _counts(stderr: str) -> dict[str, tuple[int, int, int]]:
    """(processed, received, dead-lettered) of each node, from run-tree's summary."""
    found = re.findall(
        r"node (\S+): (\d+) messages processed, (\d+) received, (\d+) dead-lettered", stderr
    )
    return {node: (int(p), int(r), int(d)) for node, p, r, d in found}


@pytest.fixture(scope="module")
def tree_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """The project, the folder run-tree ran in, and its run (``--run-dir rd``, relative:
    it once made every nats-server fail to open its config file)."""
    require(shutil.which("kubectl", path=_path()) is not None, "kubectl is not installed")
    tmp = tmp_path_factory.mktemp("outcome")
    project = _project(tmp)
    done = _vf("compile", "batch.py", "--out", str(tmp / "tree"), cwd=project, **FLOW_ENV)
    assert done.returncode == 0, done.stderr
    run = _vf(
        "run-tree",
        str(tmp / "tree"),
        "--env",
        "dev",
        "--app",
        str(project),
        "--timeout",
        "120",
        "--backoff",
        "1",
        "--run-dir",
        "rd",
        cwd=tmp,
    )
    print(run.stderr[-4000:])
    return project, tmp, run


def test_a_batch_run_that_dead_lettered_an_item_fails_with_run_locals_code(
    tree_run: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    """The sink refuses one item of 40: every Job completes, which is all a cluster sees,
    but the run is not a success. It exits 6 as ``vf run-local`` does, names the node, the
    reason with the item and the dead-letter stream, and its summary gives each node's
    received, processed and dead-lettered counts."""
    _project_dir, tmp, run = tree_run
    assert run.returncode == 6, run.stderr[-4000:]
    assert "(dev, kustomize): done with 1 item(s) dead-lettered (exit 6)" in run.stderr
    assert "[vf] sink: 1 item(s) dead-lettered; first reasons:" in run.stderr
    assert f"VF_NODE_REFUSED: Refused: refusing item {REFUSED}" in run.stderr
    assert re.search(r"\[vf\] dead letters: stream \S+dlq\S*, subjects ", run.stderr)
    counts = _counts(run.stderr)
    print(f"per node (processed, received, dead-lettered): {counts}")
    assert counts["sink"] == (COUNT - 1, COUNT, 1)
    assert counts["double"][0] == COUNT
    moved = dict(
        re.findall(r"node (\S+): .* dead-lettered, (\d+) published, \d+ redelivered", run.stderr)
    )
    assert moved == {"numbers": str(COUNT), "double": str(COUNT), "sink": "0"}, moved
    assert "the pods' logs are in rd/pods" in run.stderr
    kept = tmp / "rd"
    assert list(kept.glob("vf-dead-letters-*.jsonl")), "no copy of the dead letters kept"


def test_run_dir_keeps_every_volume_and_the_claims(
    tree_run: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    """``--run-dir`` keeps what its help promises: each pod's emptyDirs (a worker's /tmp,
    the dev broker's JetStream store) outlive the pod, and the claim holds the results."""
    _project_dir, tmp, _run = tree_run
    pods = tmp / "rd" / "pods" / "lifecycle"
    scratch = sorted(p.parent.parent.name for p in pods.glob("*/volumes/tmp"))
    print(f"pods whose /tmp was kept: {scratch}")
    for node in ("numbers", "double", "sink"):
        assert any(f"-{node}-" in name for name in scratch), node
    assert any((p / "jetstream").exists() for p in pods.glob("*nats*/volumes/data"))
    applied = _applied(tmp / "rd" / "claims" / "lifecycle" / "results" / "sink.jsonl")
    assert applied == [i for i in range(1, COUNT + 1) if i != REFUSED]


def test_run_local_agrees_with_run_tree(
    tree_run: tuple[Path, Path, subprocess.CompletedProcess[str]],
) -> None:
    """The same graph under ``vf run-local``: the same exit code and dead-letter report,
    and the claim mount (``results:/results``) is the same folder of its run directory,
    not the machine's /results."""
    project, tmp, tree = tree_run
    local = tmp / "local"
    local.mkdir()
    run = _vf("run-local", str(project / "batch.py"), "--run-dir", "rd", cwd=local, **FLOW_ENV)
    print(run.stderr[-3000:])
    assert run.returncode == tree.returncode == 6, run.stderr[-3000:]
    reason = f"VF_NODE_REFUSED: Refused: refusing item {REFUSED}"
    for output in (run.stderr, tree.stderr):
        assert "[vf] sink: 1 item(s) dead-lettered; first reasons:" in output
        assert reason in output
    folder = local / "rd" / "claims" / "lifecycle" / "results"
    assert f"[vf] sink: /results is the claim folder {folder}" in run.stderr
    applied = _applied(folder / "sink.jsonl")
    assert applied == _applied(tmp / "rd" / "claims" / "lifecycle" / "results" / "sink.jsonl")
    assert list((local / "rd").glob("vf-dead-letters-*.jsonl"))


def test_a_flow_stopped_before_its_work_was_done_is_a_stop_not_a_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop announced on the flow's control subject while its Jobs run, again at every
    retry: each worker exits with the worker's stopped code, the Jobs fail on their
    ``backoffLimit``, and the run reads as ``vf run-local`` reads a stopped run (exit 7),
    not as a lost node."""
    require(shutil.which("kubectl", path=_path()) is not None, "kubectl is not installed")
    monkeypatch.setenv("PATH", _path())
    project = _project(tmp_path)
    slow = {**FLOW_ENV, "VF_TEST_COUNT": "400", "VF_TEST_INTERVAL": "0.05", "VF_TEST_REFUSE": "0"}
    done = _vf("compile", "batch.py", "--out", str(tmp_path / "tree"), cwd=project, **slow)
    assert done.returncode == 0, done.stderr
    request = RunTreeRequest(tree=tmp_path / "tree", env="dev", app=project)
    tree, resolver = prepare(request, log=print)
    cluster = Cluster(ClusterOptions(run_dir=tmp_path / "run", backoff_base=0.2, grace_cap=10))
    try:
        assert sync(cluster, tree, resolver, mode="kubectl", app="stop", timeout=60) == []
        last = 0.0

        def stopped_or_done() -> bool:
            nonlocal last
            found = run_names(cluster, tree.plan)
            if found is not None and time.monotonic() - last > 0.5:
                last = time.monotonic()
                with contextlib.suppress(BrokerError):  # the broker may not be ready yet
                    announce_stop(*found, auth=worker_auth(cluster))
            return workloads_done(cluster, batch=True)

        finished = cluster.run_until(stopped_or_done, timeout=120)
        status = run_status(cluster, done=finished)
        codes = sorted({c.exit_code for p in cluster.pods() for c in p.containers if c.exit_code})
        print(f"status {status}, worker exit codes {codes}")
        assert status.status == "stopped" and status.lost, status
        assert exit_code(settled(status.status, None)) == 7
    finally:
        cluster.shutdown(timeout=20)
    assert cluster.idle()


def _options(auth: NatsAuth | None) -> dict[str, Any]:
    return auth.options() if auth is not None else {}


async def _delete_one_before_it_is_read(url: str, names: RunNames, options: dict[str, Any]) -> None:
    """Once the producer's marker is stored, delete its last data message from the stream."""
    client = await nats.connect(url, **options)
    try:
        js = client.jetstream()
        stream = names.stream("numbers")
        for _ in range(600):
            try:
                await js.get_last_msg(stream, names.eos_subject("numbers", replica=0))
                break
            except Exception:
                await asyncio.sleep(0.05)
        last = await js.get_last_msg(stream, names.subject("numbers"))
        await js.delete_msg(stream, last.seq)
    finally:
        await client.close()


def test_an_item_lost_before_its_reader_got_it_fails_the_node_as_run_local_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The producer's end-of-stream marker counts 40; one of its messages is deleted from the
    stream before the sink reads anything. The sink's worker fails on VF_EOS_MISMATCH, its
    restarts refuse a generation already consumed, the Job fails on its backoffLimit, and the
    run reads as ``vf run-local`` reads it (tests/runtime/worker/test_truthful.py): the node is
    lost, exit 4, and the mismatch is among the dead letters, by name."""
    require(shutil.which("kubectl", path=_path()) is not None, "kubectl is not installed")
    monkeypatch.setenv("PATH", _path())
    project = _project(tmp_path)
    done = _vf("compile", "lossy.py", "--out", str(tmp_path / "tree"), cwd=project, **FLOW_ENV)
    assert done.returncode == 0, done.stderr
    request = RunTreeRequest(tree=tmp_path / "tree", env="dev", app=project)
    tree, resolver = prepare(request, log=print)
    cluster = Cluster(ClusterOptions(run_dir=tmp_path / "run", backoff_base=0.2, grace_cap=10))
    out = io.StringIO()
    try:
        assert sync(cluster, tree, resolver, mode="kubectl", app="lossy", timeout=60) == []
        assert cluster.run_until(lambda: run_names(cluster, tree.plan) is not None, timeout=60)
        found = run_names(cluster, tree.plan)
        assert found is not None
        deleter = threading.Thread(
            target=asyncio.run,
            args=(_delete_one_before_it_is_read(*found, _options(worker_auth(cluster))),),
        )
        deleter.start()
        assert cluster.run_until(lambda: not deleter.is_alive(), timeout=60)
        finished = cluster.run_until(lambda: workloads_done(cluster, batch=True), timeout=180)
        status = run_status(cluster, done=finished)
        letters = dead_letters(cluster, tree.plan, out=out, copy_dir=tmp_path)
        logs = "\n".join(
            c.log.read_text(errors="replace")
            for p in cluster.pods()
            if p.labels.get("vf.dev/node") == "sink"
            for c in p.containers
        )
    finally:
        cluster.shutdown(timeout=20)
    print(out.getvalue(), status)
    assert status.status == "lost" and len(status.lost) == 1, status
    assert "-sink-" in status.lost[0]
    assert exit_code(settled(status.status, letters)) == 4
    assert "error[VF_EOS_MISMATCH]" in logs and "error[VF_GENERATION_FINISHED]" in logs
    assert re.search(r"^\[vf\]\s+VF_EOS_MISMATCH: 'sink' replica", out.getvalue(), re.MULTILINE)


def test_a_realtime_flow_whose_workers_crash_loop_is_lost_not_done(tmp_path: Path) -> None:
    """A REALTIME stage whose pods become ready, then die 6 s later, for ever: every
    workload was ready once, which is all ``workloads_done`` asks, but at the end of
    ``--for`` the Deployment has restarted again and again. Before: ``done (exit 0)``. Now
    it is a lost node, exit 4, naming the Deployment with its ready pods and restarts."""
    require(shutil.which("kubectl", path=_path()) is not None, "kubectl is not installed")
    project = _project(tmp_path)
    env = {"VF_TEST_OUT": "/results/sink.jsonl", "VF_TEST_CRASH_AFTER": "6"}
    done = _vf("compile", "live.py", "--out", str(tmp_path / "tree"), cwd=project, **env)
    assert done.returncode == 0, done.stderr
    run = _vf(
        "run-tree",
        str(tmp_path / "tree"),
        "--env",
        "dev",
        "--app",
        str(project),
        "--timeout",
        "120",
        "--for",
        "40",
        "--backoff",
        "1",
        cwd=tmp_path,
    )
    lines = [line for line in run.stderr.splitlines() if "deployment/" in line]
    print(f"exit {run.returncode}; " + " | ".join(lines))
    assert "all workloads ready" in run.stderr, run.stderr[-4000:]  # the premise: done once
    assert run.returncode == 4, run.stderr[-4000:]
    assert re.search(
        r"\): failed: deployment/\S+-double crash-looping \(\d/1 ready, \d+ restarts\)", run.stderr
    ), run.stderr[-4000:]
