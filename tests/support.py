"""What tests share besides fixtures: the repository layout, the examples, kustomize builds."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from vf.config.targets import load_targets

REPO = Path(__file__).resolve().parent.parent


EXAMPLES = REPO / "examples"


EXAMPLE_NAMES = sorted(p.name for p in EXAMPLES.iterdir() if (p / "graph.py").is_file())


def _environments(example: str) -> list[str]:
    targets = load_targets(EXAMPLES / example / "vf.yaml")
    return [env.name for env in targets.environments]


EXAMPLE_ENVS = [(name, env) for name in EXAMPLE_NAMES for env in _environments(name)]


def example_graph(name: str) -> str:
    return str(EXAMPLES / name / "graph.py")


def kustomize_build(kubectl: str, overlay: Path) -> str:
    done = subprocess.run(
        [kubectl, "kustomize", str(overlay)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def require(available: bool, reason: str) -> None:
    """Skip a test whose tool or data is absent, with the reason; under ``CI=true`` fail instead.

    CI installs everything the tests need (``.ci/run``), so an absence there is a broken set-up,
    never a reason to pass quietly.
    """
    if available:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"missing under CI=true: {reason}")
    pytest.skip(reason)
