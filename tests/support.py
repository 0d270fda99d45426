"""What tests share besides fixtures: the repository layout, the examples, kustomize builds."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from vf.config.targets import load_targets
from vf.emit.ordering import without_tool_annotations

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


# the APIs the chart renders an object of only where the cluster serves them (ADR 0202)
OPTIONAL_APIS = (
    "keda.sh/v1alpha1/ScaledObject",
    "monitoring.coreos.com/v1/PrometheusRule",
    "monitoring.coreos.com/v1/ServiceMonitor",
)


def helm_template(
    helm: str, chart: Path, *args: str, apis: tuple[str, ...] = OPTIONAL_APIS
) -> subprocess.CompletedProcess[str]:
    """``helm template`` as ``helm install`` renders on a cluster that serves ``apis``
    (by default every optional one, as the overlay holds their objects)."""
    served = [f"--api-versions={api}" for api in apis]
    return subprocess.run(
        [helm, "template", "vf-release", str(chart), *args, *served],
        capture_output=True,
        text=True,
        check=False,
    )


def helm_lint(helm: str, chart: Path, *values: Path) -> subprocess.CompletedProcess[str]:
    """``helm lint --strict`` of ``chart`` with the values files ``values``."""
    files = [arg for path in values for arg in ("-f", str(path))]
    return subprocess.run(
        [helm, "lint", "--strict", str(chart), *files], capture_output=True, text=True, check=False
    )


def rendered_by_name(
    helm: str, chart: Path, values: str, *args: str, namespace: str
) -> dict[tuple[str, str], Any]:
    """The objects ``helm template`` renders from ``chart`` with its file ``values``, in
    ``namespace``, by kind and name (the render must succeed)."""
    done = helm_template(helm, chart, "-n", namespace, "-f", str(chart / values), *args)
    assert done.returncode == 0, done.stderr
    return {(d["kind"], d["metadata"]["name"]): d for d in parse_docs(done.stdout)}


def parse_docs(text: str) -> list[dict[str, Any]]:
    """Every document of a multi-document YAML stream."""
    return [doc for doc in YAML(typ="safe").load_all(text) if doc is not None]


def by_identity(objects: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Objects keyed by kind, namespace and name."""
    return {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects
    }


def as_overlay(obj: dict[str, Any]) -> dict[str, Any]:
    """A chart object without Helm's own labels (``helm.sh/chart``, managed-by Helm)."""
    out = without_tool_annotations(obj)
    labels = dict(out["metadata"].get("labels") or {})
    if labels:
        assert labels.pop("helm.sh/chart") and labels["app.kubernetes.io/managed-by"] == "Helm"
        labels["app.kubernetes.io/managed-by"] = "vf"
        out["metadata"]["labels"] = labels
    return out


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


def one_environment(body: str) -> str:
    """A vf.yaml of one environment, ``dev`` in namespace ``ns``, with ``body`` (YAML lines)
    below its image."""
    lines = "".join(f"    {line}\n" for line in body.strip("\n").splitlines())
    return (
        "environments:\n  dev:\n    namespace: ns\n    images:\n      default: r.io/a:1\n" + lines
    )
