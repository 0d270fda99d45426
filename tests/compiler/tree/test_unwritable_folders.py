"""A folder a command must make or write into and cannot (``vf init DIR``, ``vf run-local
--run-dir``, ``vf run-tree --run-dir``) is the environment problem VF_FOLDER_WRITE (exit 3)
naming the folder, before the command starts a server or a worker: never VF_INTERNAL
(exit 70).

A read-only folder does not stop root, so the folder under a regular file, which stops
everyone, is the case that runs everywhere."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support import example_graph, require
from vf.cli import cli
from vf.errors import EXIT_ENVIRONMENT
from vf.runtree.tools import find_tool


@pytest.fixture(params=["under-a-file", "read-only"])
def blocked(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A folder whose new entries cannot be made."""
    if request.param == "under-a-file":
        (tmp_path / "notes.txt").write_text("a file, not a folder\n")
        yield tmp_path / "notes.txt"
        return
    if os.geteuid() == 0:
        pytest.skip("permissions do not bind root")
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        yield folder
    finally:
        folder.chmod(0o755)


def _refused(args: list[str], folder: Path) -> str:
    done = CliRunner().invoke(cli, args)
    print(done.output)
    assert done.exit_code == EXIT_ENVIRONMENT, done.output
    assert "error[VF_FOLDER_WRITE]" in done.output and "VF_INTERNAL" not in done.output
    assert repr(str(folder)) in done.output  # the folder, named
    assert "= fix: make" in done.output
    return done.output


def test_init_in_a_folder_that_cannot_take_the_project(blocked: Path) -> None:
    _refused(["init", str(blocked / "project")], blocked)
    assert not (blocked / "project").exists()


def test_run_local_with_a_run_dir_that_cannot_be_made(blocked: Path) -> None:
    output = _refused(
        ["run-local", example_graph("batch_pipeline"), "--run-dir", str(blocked / "run")],
        blocked / "run",
    )
    assert "pass another --run-dir" in output
    assert "[vf] running flow" not in output


def test_run_local_with_a_run_dir_it_cannot_write(blocked: Path) -> None:
    if blocked.is_file():
        pytest.skip("a file is not a folder that exists")
    _refused(["run-local", example_graph("batch_pipeline"), "--run-dir", str(blocked)], blocked)


@pytest.mark.slow  # above the fast tier's 1.5 s on a busy 2-core machine
def test_run_tree_with_a_run_dir_that_cannot_be_made(tmp_path: Path, blocked: Path) -> None:
    require(find_tool("kubectl") is not None, "kubectl is not installed (make setup)")
    tree = tmp_path / "deploy"
    compiled = CliRunner().invoke(
        cli, ["compile", example_graph("batch_pipeline"), "--out", str(tree)]
    )
    assert compiled.exit_code == 0, compiled.output
    app = str(Path(example_graph("batch_pipeline")).parent)
    args = ["run-tree", str(tree), "--env", "dev", "--app", app, "--run-dir", str(blocked / "run")]
    _refused(args, blocked / "run")
