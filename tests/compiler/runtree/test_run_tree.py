"""``vf run-tree`` runs every example's committed tree as a cluster would: real renderers,
real nats-server and Redis-compatible store started from the tree's own manifests, the
workers from the worker environment the image definition builds, node modules where the
image puts them. Bad input is refused by name before anything starts."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import REPO, require
from vf_runtime.local.infra import start_nats

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

EXAMPLES = REPO / "examples"
VF = [sys.executable, "-m", "vf"]

# (example, environment, renderer): every example, both renderers, every kind of broker
# the examples declare (dev Deployment, 3-node durable StatefulSet, external via a Secret).
CASES = [
    ("batch_pipeline", "dev", "kustomize"),
    ("batch_pipeline", "prod", "helm"),
    ("realtime_cameras", "dev", "helm"),
    ("realtime_cameras", "prod", "kustomize"),
    ("thumbnails", "dev", "kustomize"),
    ("thumbnails", "prod", "helm"),
    ("video_analytics", "lab", "helm"),
    ("video_analytics", "cloud", "kustomize"),
]


def _tools_path() -> str:
    extra = [str(REPO / ".tools" / "bin"), str(Path(sys.executable).parent)]
    return os.pathsep.join([*extra, os.environ.get("PATH", "")])


def _need_tools(renderer: str) -> None:
    tool = "helm" if renderer == "helm" else "kubectl"
    require(
        shutil.which(tool, path=_tools_path()) is not None,
        f"{tool} is not installed (scripts/setup installs it)",
    )


def vf(
    *args: str, cwd: Path | None = None, timeout: float = 480
) -> subprocess.CompletedProcess[str]:
    """``vf`` run to its end. The bound guards against a hang only: the first run-tree call
    may wait for another test file's build of the worker environment (the gate runs files
    side by side, ADR 228), then build the pipeline's own."""
    env = {**os.environ, "PATH": _tools_path()}
    return subprocess.run(
        [*VF, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("trees")
    found = {}
    for example in sorted({c[0] for c in CASES}):
        done = vf("compile", str(EXAMPLES / example / "graph.py"), "--out", str(out / example))
        assert done.returncode == 0, done.stderr
        found[example] = out / example
    return found


def _external_secrets(tree: Path, env: str, tmp: Path, nats_url: str) -> list[str]:
    """An external broker's URL comes from a Secret: give it the URL of a real server. (The
    broker's and store's credential Secrets vf names are made up by run-tree itself.)"""
    infra = json.loads((tree / "plan" / f"{env}.json").read_text())["infra"]
    ref = infra.get("nats_url_secret")
    if not ref:
        return []
    secrets = tmp / "secrets.yaml"
    secrets.write_text(json.dumps({ref["name"]: {ref["key"]: nats_url}}))
    return ["--secrets", str(secrets)]


@pytest.mark.parametrize(("example", "env", "renderer"), CASES)
def test_every_example_tree_runs(
    trees: dict[str, Path], tmp_path: Path, example: str, env: str, renderer: str
) -> None:
    _need_tools(renderer)
    external = start_nats(tmp_path / "external")
    try:
        args = _external_secrets(trees[example], env, tmp_path, external.url)
        run_dir = tmp_path / "run"
        done = vf(
            "run-tree",
            str(trees[example]),
            "--env",
            env,
            "--renderer",
            renderer,
            "--app",
            str(EXAMPLES / example),
            "--timeout",
            "150",
            "--for",
            "2",
            "--backoff",
            "1",
            "--run-dir",
            str(run_dir),
            "--runtime",
            "process",
            *args,
        )
    finally:
        external.stop()
    print(done.stderr[-3000:])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "done (exit 0)" in done.stderr
    assert "not emulated:" in done.stderr
    logs = list((run_dir / "pods").rglob("worker.log"))
    assert logs, "no worker ran"
    assert not any("Traceback" in p.read_text(errors="replace") for p in logs)
    moved = re.findall(r"node (\S+): (\d+) messages processed", done.stderr)
    summaries = [
        int(m) for p in logs for m in re.findall(r"summary: .*? processed=(\d+)", p.read_text())
    ]
    # REALTIME: every node moved data while the tree ran; BATCH: the workers processed items.
    assert all(int(n) > 0 for _, n in moved) and (moved or sum(summaries) > 0)


def test_a_folder_vf_did_not_write_is_refused(tmp_path: Path) -> None:
    (tmp_path / "overlays" / "dev").mkdir(parents=True)
    done = vf("run-tree", str(tmp_path), "--env", "dev")
    assert done.returncode == 2
    assert "error[VF_RUN_TREE_NOT_VF]" in done.stderr and "Traceback" not in done.stderr


def test_an_environment_not_in_the_tree_is_refused(trees: dict[str, Path]) -> None:
    done = vf("run-tree", str(trees["batch_pipeline"]), "--env", "staging")
    assert done.returncode == 2
    assert "error[VF_RUN_TREE_ENV]" in done.stderr and "dev, prod" in done.stderr


def test_a_missing_secret_is_refused_by_name_before_anything_starts(trees: dict[str, Path]) -> None:
    _need_tools("kustomize")
    done = vf(
        "run-tree",
        str(trees["realtime_cameras"]),
        "--env",
        "prod",
        "--app",
        str(EXAMPLES / "realtime_cameras"),
    )
    assert done.returncode == 2
    assert "error[VF_RUN_TREE_SECRET] Secret 'cameras-nats' key 'url'" in done.stderr
    assert "not emulated" not in done.stderr  # refused before the run began


def _copy_example(name: str, tmp: Path) -> Path:
    target = tmp / name
    shutil.copytree(EXAMPLES / name, target)
    return target


def test_a_native_component_without_a_local_command_is_refused(tmp_path: Path) -> None:
    _need_tools("kustomize")
    project = _copy_example("thumbnails", tmp_path)
    descriptor = next(project.rglob("component.yaml"))
    text = descriptor.read_text()
    descriptor.write_text(re.sub(r"\nruntime:\n(  .*\n)+", "\n", text + "\n"))
    assert "localCommand" not in descriptor.read_text()
    assert vf("compile", str(project / "graph.py"), "--out", str(tmp_path / "tree")).returncode == 0
    done = vf("run-tree", str(tmp_path / "tree"), "--env", "dev", "--app", str(project))
    assert done.returncode == 2
    assert "error[VF_RUN_TREE_COMPONENT_IMAGE]" in done.stderr and "thumbnailer" in done.stderr


def test_an_image_that_is_not_the_flows_is_refused(tmp_path: Path, trees: dict[str, Path]) -> None:
    _need_tools("kustomize")
    tree = tmp_path / "tree"
    shutil.copytree(trees["batch_pipeline"], tree)
    job = next((tree / "overlays" / "dev" / "resources").glob("job-*-merge-*.yaml"))
    job.write_text(
        job.read_text().replace("registry.example.com/vf/batch-demo:0.1.0", "busybox:1.36")
    )
    done = vf("run-tree", str(tree), "--env", "dev", "--app", str(EXAMPLES / "batch_pipeline"))
    assert done.returncode == 2
    assert "error[VF_RUN_TREE_IMAGE] image 'busybox:1.36'" in done.stderr


def test_the_worker_image_lacks_what_only_the_compiler_has(tmp_path: Path) -> None:
    """A node module that imports a package of the compiler's (click) compiles, because the
    compiler has it, but fails in the worker image, which does not. The Job fails and its
    log names the module that is really missing."""
    _need_tools("kustomize")
    project = _copy_example("batch_pipeline", tmp_path)
    nodes = project / "batch_nodes.py"
    nodes.write_text(
        nodes.read_text().replace("from vf import", "import click  # noqa\nfrom vf import", 1)
    )
    assert vf("compile", str(project / "graph.py"), "--out", str(tmp_path / "tree")).returncode == 0
    done = vf(
        "run-tree",
        str(tmp_path / "tree"),
        "--env",
        "dev",
        "--app",
        str(project),
        "--timeout",
        "90",
        "--backoff",
        "0.2",
        "--runtime",
        "process",
    )
    assert done.returncode == 4, done.stderr[-2000:]
    assert "BackoffLimitExceeded" in done.stderr
    assert "No module named 'click'" in done.stderr


def _processes_mentioning(marker: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            text = (proc / "environ").read_bytes() + (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in text and int(proc.name) != os.getpid():
            found.append(int(proc.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_an_interrupt_stops_everything_it_started(
    trees: dict[str, Path], tmp_path: Path, sig: signal.Signals
) -> None:
    """Every signal, SIGKILL included (the run's guardian then ends what vf started),
    leaves no process and no run directory behind."""
    _need_tools("kustomize")
    app = tmp_path / "cameras-app"  # a unique PYTHONPATH marks every worker it starts
    shutil.copytree(EXAMPLES / "realtime_cameras", app)
    scratch = tmp_path / "tmp"  # the default run directory is made under TMPDIR
    scratch.mkdir()
    env = {**os.environ, "PATH": _tools_path(), "TMPDIR": str(scratch)}
    command = [*VF, "run-tree", str(trees["realtime_cameras"]), "--env", "dev"]
    command += ["--app", str(app), "--for", "120", "--backoff", "1", "--runtime", "process"]
    with subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "holding" in line:
                break
        running = _processes_mentioning(str(app)) + _processes_mentioning(str(scratch))
        assert len(running) >= 8  # nats-server and every worker replica
        proc.send_signal(sig)
        rest = proc.stderr.read()
        code = proc.wait(timeout=90)
    if sig == signal.SIGKILL:
        assert code == -signal.SIGKILL
    else:
        assert code == 130, rest[-2000:]
        assert "every process stopped" in rest
    deadline = time.monotonic() + 20
    while _processes_mentioning(str(scratch)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_mentioning(str(app)) == [] and _processes_mentioning(str(scratch)) == []
    assert list(scratch.iterdir()) == []
