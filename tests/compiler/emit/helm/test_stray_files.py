"""Helm renders every file of a chart, so a file under ``chart/`` that vf did not write (a
leftover template, a subchart) changes what a release installs: ``vf compile --check`` and
``vf diff`` report it, and an untouched tree stays clean (ADR 152)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.support import example_graph
from vf.cli import cli

LEFTOVER = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: left-over\n"


def _vf(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(cli, list(args))
    return done.exit_code, done.output


def test_a_file_vf_did_not_write_under_the_chart_is_reported(tmp_path: Path) -> None:
    graph, out = example_graph("batch_pipeline"), tmp_path / "deploy"
    assert _vf("compile", graph, "--out", str(out))[0] == 0
    assert _vf("compile", graph, "--out", str(out), "--check")[0] == 0
    code, _ = _vf("diff", graph, "--out", str(out))
    assert code == 0
    (out / "chart" / "templates" / "old-generation.yaml").write_text(LEFTOVER)
    (out / "chart" / "charts").mkdir()
    (out / "chart" / "charts" / "extra.tgz").write_bytes(b"\x1f\x8b")
    (out / "notes.md").write_text("a file of the user's, outside the chart\n")
    (out / "manifests" / "dev").mkdir(parents=True)  # Argo CD applies every file there
    (out / "manifests" / "dev" / "extra.yaml").write_text(LEFTOVER)

    code, output = _vf("compile", graph, "--out", str(out), "--check")
    print(output)
    assert code == 1
    assert "Only in the tree: chart/templates/old-generation.yaml" in output
    assert "Only in the tree: chart/charts/extra.tgz" in output
    assert "Only in the tree: manifests/dev/extra.yaml" in output
    assert "notes.md" not in output

    code, output = _vf("diff", graph, "--out", str(out), "--format", "json")
    report = json.loads(output)
    assert code == 1 and report["changed"] is True
    assert report["strays"] == [
        "chart/charts/extra.tgz",
        "chart/templates/old-generation.yaml",
        "manifests/dev/extra.yaml",
    ]
    code, output = _vf("diff", graph, "--out", str(out))
    assert code == 1 and "chart/templates/old-generation.yaml" in output
    code, output = _vf("compile", graph, "--out", str(out))  # kept, and named
    assert code == 0 and (out / "chart" / "templates" / "old-generation.yaml").is_file()
    assert "warning[VF_OUTPUT_STRAY] chart/templates/old-generation.yaml" in output
