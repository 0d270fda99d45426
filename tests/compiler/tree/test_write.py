"""Writing: atomic replacement, ownership, pruning, and --check."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support import example_graph
from vf.cli import cli
from vf.errors import VfError
from vf.tree.write import MANIFEST, write_tree


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_compile_then_check_is_clean(tmp_path: Path) -> None:
    out = str(tmp_path / "deploy")
    graph = example_graph("batch_pipeline")
    assert _invoke("compile", graph, "--out", out)[0] == 0
    code, output = _invoke("compile", graph, "--out", out, "--check")
    assert code == 0, output


def test_check_reports_a_stale_tree_with_a_diff(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    graph = example_graph("batch_pipeline")
    _invoke("compile", graph, "--out", str(out))
    target = next((out / "overlays" / "dev" / "resources").glob("job-*-merge-*.yaml"))
    target.write_text(target.read_text().replace("backoffLimit: 3", "backoffLimit: 9"))
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    code, output = _invoke("compile", graph, "--out", str(out), "--check")
    assert code == 1
    assert "-  backoffLimit: 9" in output and "+  backoffLimit: 3" in output
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_check_on_a_missing_tree_is_stale(tmp_path: Path) -> None:
    code, _ = _invoke(
        "compile", example_graph("batch_pipeline"), "--out", str(tmp_path / "x"), "--check"
    )
    assert code == 1
    assert not (tmp_path / "x").exists()


def test_refuses_a_directory_it_does_not_own(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    code, output = _invoke("compile", example_graph("batch_pipeline"), "--out", str(out))
    assert code == 2
    assert "error[VF_OUTPUT_NOT_OWNED]" in output
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_prunes_only_its_own_stale_files(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    write_tree(out, {"a/one.yaml": "one\n", "two.yaml": "two\n"})
    (out / "a" / "user.txt").write_text("user file")
    write_tree(out, {"two.yaml": "2\n"})
    assert not (out / "a" / "one.yaml").exists()
    assert (out / "a" / "user.txt").read_text() == "user file"
    assert (out / "two.yaml").read_text() == "2\n"
    assert (out / MANIFEST).is_file()
    assert not list(tmp_path.glob(".deploy.vf-new-*"))


def test_failed_compile_leaves_the_previous_tree(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    graph = example_graph("batch_pipeline")
    _invoke("compile", graph, "--out", str(out))
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    code, _ = _invoke("compile", graph, "--out", str(out), "--env", "nope")
    assert code == 2
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_output_path_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(VfError) as info:
        write_tree(target, {"a": "b"})
    assert info.value.code == "VF_OUTPUT_NOT_DIR"


def test_leftover_staging_from_a_killed_run_is_swept(tmp_path: Path) -> None:
    leftover = tmp_path / ".deploy.vf-new-999999999"
    leftover.mkdir()
    (leftover / "half.yaml").write_text("partial")
    write_tree(tmp_path / "deploy", {"x.yaml": "x\n"})
    assert not leftover.exists()
