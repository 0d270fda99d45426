"""``vf diff`` in pipeline terms, its three formats (goldens), exit codes and tree reading."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode
from syrupy.location import PyTestLocation
from syrupy.types import SnapshotIndex

from tests.support import EXAMPLE_NAMES, EXAMPLES, REPO, example_graph
from vf.cli import cli
from vf.commands.diff.command import diff_project
from vf.commands.diff.report import RENDERERS
from vf.emit.ordering import without_tool_annotations
from vf.errors import VfError
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.tree.read import build_overlay
from vf.tree.write import write_tree

GOLDEN = REPO / "tests" / "golden" / "diff"
ADD_AUDIT = (
    '    store = ResultStore(path="/tmp/results.jsonl", idempotent=True)(merge)\n'
    '    audit = ResultStore(path="/tmp/audit.jsonl", name="audit")(merge)\n'
    "    return Flow([store, audit], flow_type=BATCH)\n"
)


class DiffReport(SingleFileSnapshotExtension):
    """One golden file per report: ``golden/diff/<name>.golden``."""

    _write_mode = WriteMode.TEXT
    file_extension = "golden"

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(GOLDEN)

    @classmethod
    def discovery_dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(GOLDEN)

    @classmethod
    def get_snapshot_name(cls, *, test_location: PyTestLocation, index: SnapshotIndex = 0) -> str:
        return str(index)


def _copy_example(root: Path, name: str) -> Path:
    target = root / name
    shutil.copytree(EXAMPLES / "batch_pipeline", target)
    return target / "graph.py"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


@pytest.fixture
def realistic_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CompileResult:
    """Committed: the batch example with a replay_archive channel. Now: a node added,
    the dev image bumped and the channel's profile weakened to reliable_work."""
    monkeypatch.chdir(tmp_path)
    before = _copy_example(tmp_path, "before")
    _edit(before.parent / "vf.yaml", "merge: reliable_work", "merge: replay_archive")
    write_tree(Path("deploy"), compile_project(CompileRequest(graph=str(before))).tree)
    after = _copy_example(tmp_path, "after")
    _edit(
        after,
        '    store = ResultStore(path="/tmp/results.jsonl", idempotent=True)(merge)\n'
        "    return Flow([store], flow_type=BATCH)\n",
        ADD_AUDIT,
    )
    _edit(after.parent / "vf.yaml", "batch-demo:0.1.0", "batch-demo:0.2.0")
    return compile_project(CompileRequest(graph=str(after)))


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
def test_realistic_change_golden(
    fmt: str, realistic_change: CompileResult, snapshot: SnapshotAssertion
) -> None:
    report = diff_project(realistic_change, out=Path("deploy"))
    assert report.changed
    assert RENDERERS[fmt](report) == snapshot.use_extension(DiffReport)(name=f"batch_change.{fmt}")


def test_realistic_change_in_pipeline_terms(realistic_change: CompileResult) -> None:
    report = diff_project(realistic_change, out=Path("deploy"))
    prod = next(e for e in report.environments if e.environment == "prod")
    messages = {(f.category, f.subject): f for f in prod.findings}
    assert messages[("node", "audit")].message.startswith("node added")
    weakened = messages[("guarantee", "channel merge")]
    assert "weakened: replay_archive → reliable_work" in weakened.message
    assert weakened.severity == "warning"
    dev = next(e for e in report.environments if e.environment == "dev")
    images = [f for f in dev.findings if f.category == "image"]
    assert images and all("batch-demo:0.1.0 → registry" in f.message for f in images)
    assert ("run", "streams") in messages
    replaced = [r for r in prod.resources if r.action == "replaced"]
    assert any(r.kind == "Job" and "-provision-g" in r.previous for r in replaced)


def test_image_bump_recreates_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    graph = _copy_example(tmp_path, "flow")
    write_tree(Path("deploy"), compile_project(CompileRequest(graph=str(graph))).tree)
    _edit(graph.parent / "vf.yaml", "batch-demo:0.1.0", "batch-demo:0.3.0")
    result = compile_project(CompileRequest(graph=str(graph)))
    report = diff_project(result, out=Path("deploy"), environments=("dev",), raw=True)
    (dev,) = report.environments
    jobs = [f for f in dev.findings if f.category == "job"]
    assert len(jobs) == 6 and all("replaces Job/" in f.message for f in jobs)
    assert "+        image: registry.example.com/vf/batch-demo:0.3.0" in report.raw
    assert [e.environment for e in report.environments] == ["dev"]


def test_selector_change_is_breaking(
    compiled_examples: dict[str, CompileResult], tmp_path: Path
) -> None:
    result = compiled_examples["realtime_cameras"]
    write_tree(tmp_path / "deploy", result.tree)
    base = next((tmp_path / "deploy" / "overlays").glob("*/resources/statefulset-*-tracker.yaml"))
    text = base.read_text(encoding="utf-8")
    _edit(
        base, "  selector:\n    matchLabels:\n", "  selector:\n    matchLabels:\n      old: label\n"
    )
    assert base.read_text(encoding="utf-8") != text
    report = diff_project(result, out=tmp_path / "deploy")
    findings = [f for e in report.environments for f in e.findings if f.category == "selector"]
    assert findings and all(f.severity == "breaking" for f in findings)


def test_cli_exit_codes(compiled_examples: dict[str, CompileResult], tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    graph = example_graph("realtime_cameras")
    first = CliRunner().invoke(cli, ["diff", graph, "--out", str(out)])
    assert first.exit_code == 1, first.output
    assert "would change" in first.output
    write_tree(out, compiled_examples["realtime_cameras"].tree)
    same = CliRunner().invoke(cli, ["diff", graph, "--out", str(out), "--format", "json"])
    assert same.exit_code == 0, same.output
    document = json.loads(same.output)
    assert document["changed"] is False
    assert {e["status"] for e in document["environments"]} == {"unchanged"}
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("not vf's", encoding="utf-8")
    refused = CliRunner().invoke(cli, ["diff", graph, "--out", str(tmp_path / "mine")])
    assert refused.exit_code == 2
    assert "VF_OUTPUT_NOT_OWNED" in refused.output


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_reading_the_tree_back_gives_each_environments_objects(
    example: str, compiled_examples: dict[str, CompileResult]
) -> None:
    result = compiled_examples[example]
    for env, objects in result.objects.items():
        built = {
            (o["kind"], o["metadata"]["name"]): without_tool_annotations(o)
            for o in build_overlay(result.tree, env=env)
        }
        expected = {}
        for obj in objects:
            clean = without_tool_annotations(obj)
            clean["metadata"].pop("namespace", None)
            expected[(obj["kind"], obj["metadata"]["name"])] = clean
        assert built == expected


def test_unknown_kustomize_features_are_refused(
    compiled_examples: dict[str, CompileResult],
) -> None:
    tree = dict(compiled_examples["batch_pipeline"].tree)
    tree["overlays/dev/kustomization.yaml"] += "namePrefix: x-\n"
    with pytest.raises(VfError) as caught:
        build_overlay(tree, env="dev")
    assert caught.value.code == "VF_DIFF_TREE"
    assert "namePrefix" in caught.value.render()


def test_json_formats_on_explain_and_validate() -> None:
    graph = example_graph("realtime_cameras")
    explained = CliRunner().invoke(cli, ["explain", graph, "--format", "json"])
    assert explained.exit_code == 0, explained.output
    document = json.loads(explained.output)
    prod = next(e for e in document["environments"] if e["name"] == "prod")
    detector = next(w for w in prod["workloads"] if w["node"] == "detector")
    assert detector["autoscaled"] is True
    valid = CliRunner().invoke(cli, ["validate", graph, "--format", "json"])
    assert valid.exit_code == 0
    assert json.loads(valid.output)["ok"] is True
    wrong = CliRunner().invoke(cli, ["validate", graph, "--format", "json", "--env", "qa"])
    assert wrong.exit_code == 2
    problems = json.loads(wrong.output)
    assert problems["ok"] is False
    assert problems["problems"][0]["code"] == "VF_CONFIG_UNKNOWN_ENV"


def test_shell_completion_knows_the_commands() -> None:
    env = {**os.environ, "_VF_COMPLETE": "bash_complete", "COMP_WORDS": "vf di", "COMP_CWORD": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "vf"], env=env, capture_output=True, text=True, check=False
    )
    assert "plain,diff" in done.stdout.splitlines()


def test_the_readme_names_every_command_that_exits_1() -> None:
    """Exit 1 means "something would change": every command of vf's CLI that returns it
    (``EXIT_STALE``) is named in the README's exit-code table and in its own row."""
    import ast

    root = REPO
    source = (root / "compiler" / "vf" / "cli.py").read_text(encoding="utf-8")
    stale = sorted(
        str(decorator.args[0].value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef) and "EXIT_STALE" in ast.unparse(node)
        for decorator in node.decorator_list
        if isinstance(decorator, ast.Call)
        and ast.unparse(decorator.func) == "cli.command"
        and isinstance(decorator.args[0], ast.Constant)
    )
    assert stale == ["compile", "diff"]
    readme = (root / "README.md").read_text(encoding="utf-8").splitlines()
    exit_one = next(line for line in readme if line.startswith("| 1 |"))
    for name in stale:
        assert f"`vf {name}" in exit_one, (name, exit_one)
        row = next(line for line in readme if line.startswith(f"| `vf {name} "))
        assert "exits 1" in row, (name, row)
