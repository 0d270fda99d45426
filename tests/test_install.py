"""vf installed the way users install it: the worker environment ``vf run-tree`` uses (what
the worker image holds), and the full wheel in a fresh venv outside the checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from vf.worker_env import STAMP_NAME, WorkerEnv, ensure_worker_env

pytestmark = pytest.mark.install


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
        "import vf_runtime.worker, vf_runtime.provision\n"
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
    "module", ["vf.cli", "vf.pipeline", "click", "jinja2", "ruamel.yaml", "jsonschema"]
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
    assert _python(env, "import vf_runtime.worker", tmp_path).returncode == 0
