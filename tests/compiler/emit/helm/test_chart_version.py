"""The chart's version orders: the same input keeps it (byte-identical tree), a change takes
the next patch number, Helm accepts and packages it, and a broken one is a named error."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from tests.graph_sources import NODES
from tests.support import helm_lint
from vf.cli import cli

GRAPH = (
    NODES
    + """

def build_flow():
    return Flow([Sink(name="sink")(Work(name="work")(Src(name="src")))], flow_type=REALTIME,
                flow_id="versions")
"""
)
CONFIG = """environments:
  dev:
    namespace: versions-dev
    images: {{default: r.io/v:1}}
    replicas: {{{node}: {replicas}}}
"""


def _compile(project: Path, *, replicas: int, node: str = "work") -> None:
    """Compile the flow, its middle node named ``node`` with ``replicas``."""
    graph = GRAPH.replace('name="work"', f'name="{node}"')
    (project / "graph.py").write_text(graph, encoding="utf-8")
    config = CONFIG.format(replicas=replicas, node=node)
    (project / "vf.yaml").write_text(config, encoding="utf-8")
    done = CliRunner().invoke(
        cli, ["compile", str(project / "graph.py"), "--out", str(project / "deploy")]
    )
    assert done.exit_code == 0, done.output


def _chart(project: Path) -> dict[str, object]:
    meta = YAML(typ="safe").load((project / "deploy" / "chart" / "Chart.yaml").read_text())
    assert isinstance(meta, dict)
    return meta


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _semver(version: object) -> tuple[int, ...]:
    return tuple(int(part) for part in str(version).split("."))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "graph.py").write_text(GRAPH, encoding="utf-8")
    return tmp_path


def test_the_version_increases_with_the_chart_and_only_then(project: Path, helm: str) -> None:
    _compile(project, replicas=1)
    first = _chart(project)
    assert first["version"] == "0.1.0"
    before = _tree_digest(project / "deploy")
    _compile(project, replicas=1)
    assert _tree_digest(project / "deploy") == before  # same input, same tree
    # a count is the environment's values alone (values-dev.yaml), every object that
    # follows it a role template's (ADR 188, 243): the chart is the same
    _compile(project, replicas=2)
    assert _chart(project)["version"] == "0.1.0"
    _compile(project, replicas=2, node="stage")  # a node of another name: another chart
    second = _chart(project)
    assert _semver(second["version"]) > _semver(first["version"])
    assert second["version"] == "0.1.1"
    _compile(project, replicas=2, node="stage")
    assert _chart(project)["version"] == "0.1.1"
    diff = CliRunner().invoke(
        cli, ["diff", str(project / "graph.py"), "--out", str(project / "deploy")]
    )
    assert diff.exit_code == 0, diff.output  # an unchanged flow: the version carries on
    chart = project / "deploy" / "chart"
    lint = helm_lint(helm, chart)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    packaged = subprocess.run(
        [helm, "package", str(chart), "-d", str(project)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert packaged.returncode == 0, packaged.stderr
    assert (project / "versions-0.1.1.tgz").is_file()


def test_a_chart_from_before_the_digest_counts_on(project: Path) -> None:
    _compile(project, replicas=1)
    path = project / "deploy" / "chart" / "Chart.yaml"
    text = path.read_text().replace('version: "0.1.0"', "version: 1.4.0+0123456789ab")
    path.write_text("\n".join(li for li in text.splitlines() if "content-digest" not in li))
    _compile(project, replicas=1)
    assert _chart(project)["version"] == "1.4.1"


def test_an_unreadable_version_is_a_named_error_and_nothing_is_written(project: Path) -> None:
    _compile(project, replicas=1)
    path = project / "deploy" / "chart" / "Chart.yaml"
    path.write_text(path.read_text().replace('version: "0.1.0"', "version: latest"))
    before = _tree_digest(project / "deploy")
    (project / "vf.yaml").write_text(CONFIG.format(replicas=2, node="work"), encoding="utf-8")
    done = CliRunner().invoke(
        cli, ["compile", str(project / "graph.py"), "--out", str(project / "deploy")]
    )
    assert done.exit_code == 2
    assert "error[VF_CHART_VERSION]" in done.output and "Traceback" not in done.output
    assert _tree_digest(project / "deploy") == before
