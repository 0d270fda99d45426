"""``vf run-tree --runtime podman``: the committed tree's worker and provision pods as real
OCI containers, from the image the tree names, on real nats-server and Valkey.

The lifecycle scenarios of ``test_run_tree_lifecycle.py`` run here unchanged, through
containers, and must count the same. Then what only a container shows: a read-only root
filesystem, a memory limit, a package the image lacks, and no container left behind
when ``vf run-tree`` is stopped or killed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compiler.runtree import test_run_tree_lifecycle as lifecycle
from tests.support import REPO, require
from vf.runtree.cluster import Cluster
from vf.runtree.podhost import ClusterOptions
from vf.runtree.podman_runtime import PodmanRuntime
from vf.runtree.validation import invalid_paths
from vf_runtime.labels import RUN_TREE_LABEL

APP = REPO / "tests" / "runtree_podman"
FLOW_IMAGES = ("registry.example.com/vf/tree-tests:1", "registry.example.com/vf/tree-tests:2")
VF = [sys.executable, "-m", "vf"]

container = [pytest.mark.container, pytest.mark.slow]


def _podman() -> PodmanRuntime:
    from vf.containers.engine import find_podman

    podman = find_podman()
    require(podman is not None, "podman is not installed (apt-get install podman runc)")
    assert podman is not None
    return PodmanRuntime(podman)


_BUILT: set[str] = set()


def _images(runtime: PodmanRuntime, app: Path, tags: tuple[str, ...]) -> None:
    """Build the images the trees name from their project folder, once per test session
    (the tests that use a Cluster directly do not go through vf run-tree's own build)."""
    from vf.containers.build import ensure_pipeline_image

    for tag in tags:
        if tag not in _BUILT:
            ensure_pipeline_image(runtime.podman, tag=tag, app_dir=app, log=print)
            _BUILT.add(tag)


def _listed(run_id: str) -> list[str]:
    """podman's own listing of a run's containers, running or not."""
    done = subprocess.run(
        [
            "podman",
            "ps",
            "--all",
            f"--filter=label={RUN_TREE_LABEL}={run_id}",
            "--format={{.Names}}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    """The lifecycle tests' cluster, with the worker image's containers run by podman."""
    runtime = _podman()
    _images(runtime, lifecycle.FLOWS, FLOW_IMAGES)
    monkeypatch.setenv("PATH", lifecycle._path())
    options = ClusterOptions(
        run_dir=tmp_path / "cluster", backoff_base=0.5, grace_cap=10, oci=runtime
    )
    made = Cluster(options)
    yield made
    made.shutdown(timeout=20)
    assert made.idle()
    assert _listed(runtime.run_id) == []


def _in_containers(test: object) -> object:
    """A lifecycle test, collected here so that it takes this module's ``cluster``."""
    for mark in reversed(container):
        test = mark(test)
    return test


test_first_sync_in_containers = _in_containers(
    lifecycle.test_first_sync_delivers_everything_once_and_deletion_leaves_nothing
)
test_changed_batch_flow_in_containers = _in_containers(
    lifecycle.test_a_changed_batch_flow_is_new_jobs_beside_the_old_ones_and_processes_everything
)
test_realtime_rollout_in_containers = _in_containers(
    lifecycle.test_a_realtime_rollout_keeps_data_moving
)
test_changed_graph_in_containers = _in_containers(
    lifecycle.test_a_changed_graph_starts_a_new_run_beside_the_old_one
)
test_two_flows_in_containers = _in_containers(
    lifecycle.test_two_flows_in_one_namespace_run_side_by_side_and_prune_apart
)
# The broker is deleted with the workers: a producer that cannot publish its end-of-stream
# marker says so and exits within the 10 s grace the cluster gives here (STOP-6).
test_delete_at_once_in_containers = _in_containers(
    lifecycle.test_deleting_a_running_flow_at_once_stops_every_process_promptly
)


def _vf(
    *args: str, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": lifecycle._path()}
    return subprocess.run(
        [*VF, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout, check=False
    )


def _tree(graph: str, out: Path, *config: str) -> Path:
    done = _vf("compile", str(APP / graph), "--out", str(out), *config, cwd=APP)
    assert done.returncode == 0, done.stderr
    return out


def _run(tree: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    _podman()
    done = _vf(
        "run-tree",
        str(tree),
        "--env",
        "dev",
        "--app",
        str(APP),
        "--runtime",
        "podman",
        "--backoff",
        "0.3",
        "--timeout",
        "150",
        "--run-dir",
        str(tmp / "run"),
        *extra,
    )
    print(done.stderr[-4000:])
    run_id = re.search(rf"{RUN_TREE_LABEL}=(\w+)", done.stderr)
    assert run_id is not None and _listed(run_id.group(1)) == []
    return done


def _logs(tmp: Path, node: str) -> str:
    logs = sorted((tmp / "run" / "pods").rglob(f"*-{node}-*/worker.log"))
    assert logs, f"no pod of {node} ran"
    return "\n".join(p.read_text(errors="replace") for p in logs)


@pytest.mark.container
@pytest.mark.slow
def test_a_node_writing_beside_its_module_meets_the_read_only_root(tmp_path: Path) -> None:
    """In a local process the write succeeds; in the pod (readOnlyRootFilesystem) it is
    EROFS, and the worker names it: its breaker opens, and items are dead-lettered."""
    done = _run(_tree("writes.py", tmp_path / "tree"), tmp_path)
    assert "runtime: podman" in done.stderr
    text = _logs(tmp_path, "beside")
    assert "Read-only file system: '/app/item-" in text
    assert "error[VF_BREAKER_OPEN]" in text or "VF_NODE_OSERROR" in text
    assert not list(APP.glob("item-*.txt"))  # nothing reached the project folder


@pytest.mark.container
@pytest.mark.slow
def test_a_memory_limit_below_the_nodes_need_is_oomkilled_and_fails_the_job(
    tmp_path: Path,
) -> None:
    tree = _tree("hog.py", tmp_path / "tree", "--config", str(APP / "hog.yaml"))
    done = _run(tree, tmp_path)
    assert done.returncode == 4, done.stderr[-3000:]
    oom = "OOMKilled: container worker, memory limit 128Mi, exit 137"
    failed = re.findall(r"pod (\S+-hog-\S+) failed \((.*)\)", done.stderr)
    assert len(failed) == 4 and all(what == oom for _, what in failed)  # backoffLimit 3
    assert f"failed: BackoffLimitExceeded (4 failures; last: {oom})" in done.stderr
    assert f"--- {oom}" in _logs(tmp_path, "hog")


@pytest.mark.container
@pytest.mark.slow
def test_a_package_the_image_lacks_fails_with_the_workers_own_message(tmp_path: Path) -> None:
    """The compiler has jinja2, so the graph compiles; the worker image does not."""
    done = _run(_tree("lacking.py", tmp_path / "tree"), tmp_path)
    assert done.returncode == 4, done.stderr[-3000:]
    text = _logs(tmp_path, "templated")
    assert "error[VF_ENV]" in text and "No module named 'jinja2'" in text


@pytest.mark.container
@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_stopped_or_killed_run_leaves_no_container(tmp_path: Path, sig: signal.Signals) -> None:
    """SIGTERM: vf stops every pod and removes its containers. SIGKILL: the run's guardian
    ends the ``podman run`` processes and removes the containers. podman's listing says."""
    _podman()
    tree = lifecycle.compile_tree(
        "live.py",
        tmp_path / "tree",
        config=lifecycle.config(tmp_path),
        out="/results/s.jsonl",
    )
    command = [*VF, "run-tree", str(tree), "--env", "dev", "--app", str(lifecycle.FLOWS)]
    command += ["--runtime", "podman", "--for", "120", "--backoff", "1"]
    env = {**os.environ, "PATH": lifecycle._path()}
    run_id = ""
    with subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            found = re.search(rf"{RUN_TREE_LABEL}=(\w+)", line)
            run_id = found.group(1) if found else run_id
            if "holding" in line:
                break
        assert run_id and len(_listed(run_id)) >= 4  # provision is gone; every worker runs
        proc.send_signal(sig)
        rest = proc.stderr.read()
        code = proc.wait(timeout=120)
    if sig == signal.SIGTERM:
        assert code == 130, rest[-2000:]
        assert "every process and container stopped" in rest
    deadline = time.monotonic() + 60
    while _listed(run_id) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _listed(run_id) == []


@pytest.mark.container
def test_no_build_and_no_image_is_refused_by_name_with_the_build_to_run(tmp_path: Path) -> None:
    _podman()
    absent = "absent-" + os.urandom(4).hex()
    tree = lifecycle.compile_tree(
        "batch.py",
        tmp_path / "tree",
        config=lifecycle.config(tmp_path, image=absent),
        out="/results/sink.jsonl",
    )
    done = _vf(
        "run-tree",
        str(tree),
        "--env",
        "dev",
        "--app",
        str(lifecycle.FLOWS),
        "--runtime",
        "podman",
        "--no-build",
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"error[VF_RUN_TREE_NO_IMAGE] image 'registry.example.com/vf/tree-tests:{absent}'" in (
        done.stderr
    )
    assert f"podman build -t registry.example.com/vf/tree-tests:{absent}" in done.stderr


def test_paths_the_api_server_refuses_are_refused_by_name() -> None:
    spec = {
        "volumes": [
            {"name": "c", "configMap": {"name": "x", "items": [{"key": "a", "path": "/etc/a"}]}},
            {
                "name": "p",
                "projected": {
                    "sources": [
                        {"secret": {"name": "s", "items": [{"key": "k", "path": "a/../b"}]}}
                    ]
                },
            },
        ],
        "containers": [
            {
                "name": "w",
                "volumeMounts": [
                    {"name": "c", "mountPath": "/x", "subPath": "../up"},
                    {"name": "c", "mountPath": "/y", "subPath": "ok/below"},
                ],
            }
        ],
    }
    problems = invalid_paths([("job/j", spec)])
    assert [(p.code, p.what, p.where) for p in problems] == [
        (
            "VF_RUN_TREE_INVALID",
            "spec.volumes[0].configMap.items[0].path: Invalid value: '/etc/a': "
            "must be a relative path",
            "job/j",
        ),
        (
            "VF_RUN_TREE_INVALID",
            "spec.volumes[1].projected.sources[0].secret.items[0].path: Invalid value: "
            "'a/../b': must not contain '..'",
            "job/j",
        ),
        (
            "VF_RUN_TREE_INVALID",
            "spec.containers[0].volumeMounts[0].subPath: Invalid value: '../up': "
            "must not contain '..'",
            "job/j",
        ),
    ]


def test_a_tree_with_a_subpath_out_of_its_volume_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    tree = lifecycle.compile_tree(
        "batch.py", tmp_path / "tree", out="/results/sink.jsonl", count="5", tag="a"
    )
    job = next(tree.glob("overlays/*/resources/job-*-sink-*.yaml"))
    mount = "        - mountPath: /results\n"
    assert mount in job.read_text()
    job.write_text(job.read_text().replace(mount, mount + "          subPath: ../x\n"))
    done = _vf("run-tree", str(tree), "--env", "dev", "--app", str(lifecycle.FLOWS))
    assert done.returncode == 2, done.stderr[-2000:]
    assert "error[VF_RUN_TREE_INVALID]" in done.stderr and "must not contain '..'" in done.stderr
    assert "runtime:" not in done.stderr  # refused before the run began


@pytest.mark.container
@pytest.mark.slow
def test_a_node_module_the_apps_own_dockerfile_leaves_out_is_a_named_error(
    tmp_path: Path,
) -> None:
    """The --app folder's Dockerfile copies one node module of two: the image builds, and the
    module the plan names is not in it. vf run-tree says which, before any pod starts."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "podman_nodes.py").write_text((APP / "podman_nodes.py").read_text())
    image = "registry.example.com/vf/podman-forgot:1"  # a tag no other test builds
    (app / "vf.yaml").write_text(
        (APP / "vf.yaml").read_text().replace("registry.example.com/vf/podman-tests:1", image)
    )
    (app / "forgotten_nodes.py").write_text(
        "from typing import Any\n\nfrom vf import Consumer\n\n\n"
        "class Drop(Consumer):\n"
        "    def consume(self, item: dict[str, Any]) -> None:\n"
        "        return None\n"
    )
    (app / "forgot.py").write_text(
        "from forgotten_nodes import Drop\nfrom podman_nodes import Count\n\n"
        "from vf import BATCH, Flow\n\n\n"
        "def build_flow() -> Flow:\n"
        '    return Flow([Drop(name="drop")(Count(name="count"))], flow_type=BATCH, '
        'flow_id="podman-forgot")\n'
    )
    (app / "Dockerfile").write_text(
        "ARG PYTHON_IMAGE\nFROM ${PYTHON_IMAGE}\nCOPY --chown=65532:65532 podman_nodes.py /app/\n"
    )
    done = _vf("compile", str(app / "forgot.py"), "--out", str(tmp_path / "tree"), cwd=app)
    assert done.returncode == 0, done.stderr
    started = time.monotonic()
    done = _vf(
        "run-tree",
        str(tmp_path / "tree"),
        "--env",
        "dev",
        "--app",
        str(app),
        "--runtime",
        "podman",
        "--timeout",
        "150",
        "--run-dir",
        str(tmp_path / "run"),
    )
    assert done.returncode == 2, done.stderr[-3000:]
    assert "error[VF_PIPELINE_IMAGE]" in done.stderr and "Traceback" not in done.stderr
    assert "lacks the node module 'forgotten_nodes' (node 'drop')" in done.stderr
    assert "COPY forgotten_nodes.py /app/" in done.stderr
    assert str(app / "Dockerfile") in done.stderr
    assert not list((tmp_path / "run").rglob("worker.log"))  # refused before any pod ran
    assert time.monotonic() - started < 120  # not the Job's four failed tries
    _podman().podman.run(["rmi", "--force", image], timeout=120)
