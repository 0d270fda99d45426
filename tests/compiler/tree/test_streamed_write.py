"""The tree streamed into its staging directory: the same bytes as the tree built in memory,
nothing left behind when a compile or a file fails, pieces written whole (ADR 24)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.graph_sources import NODES
from tests.support import EXAMPLE_NAMES, example_graph
from tests.test_determinism import _read_tree
from vf.errors import VfError
from vf.pipeline import CompileResult
from vf.textio.filetext import Chunks
from vf.tree.write import TreeCheck, diff_tree, staged_tree, with_manifest, write_tree


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_the_vf_executable_writes_the_tree_compiled_in_memory(
    tmp_path: Path, compiled_examples: dict[str, CompileResult], example: str
) -> None:
    """``vf compile`` frees each stage's output early and makes its files in another order
    than the compile that keeps everything; the trees are the same, GitOps and GPU too."""
    out = tmp_path / "deploy"
    argv = [sys.executable, "-m", "vf", "compile", example_graph(example)]
    done = subprocess.run([*argv, "--out", str(out)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    expected = with_manifest(compiled_examples[example].tree)
    assert _read_tree(out) == expected
    assert f"wrote {len(expected)} files" in done.stderr
    again = subprocess.run(
        [*argv, "--out", str(out), "--check"], capture_output=True, text=True, check=False
    )
    assert again.returncode == 0, again.stdout + again.stderr


def test_an_error_after_some_files_leaves_nothing_new(tmp_path: Path) -> None:
    out = tmp_path / "new" / "deeper" / "deploy"
    with pytest.raises(RuntimeError), staged_tree(out) as stage:
        stage.add("plan/dev.json", "{}\n")
        raise RuntimeError("a later environment failed")
    assert list(tmp_path.iterdir()) == []


def test_an_error_keeps_the_previous_tree(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    write_tree(out, {"a.yaml": "a: 1\n"})
    before = _read_tree(out)
    with pytest.raises(KeyboardInterrupt), staged_tree(out) as stage:
        stage.add("a.yaml", "a: 2\n")
        raise KeyboardInterrupt
    assert _read_tree(out) == before
    assert not list(tmp_path.glob(".deploy.vf-new-*"))


def test_a_file_in_pieces_is_written_whole(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    pieces = ["x" * 100_000] * 5 + ["é\n"]
    with staged_tree(out) as stage:
        stage.add("big.json", Chunks(iter(pieces)))
        stage.add("small.yaml", "a: 1\n")
        stage.add("small.yaml", "a: 2\n")  # a path given twice keeps the later text
    assert _read_tree(out) == with_manifest({"big.json": "".join(pieces), "small.yaml": "a: 2\n"})


def test_a_surrogate_in_a_later_piece_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    write_tree(out, {"a.yaml": "a: 1\n"})
    before = _read_tree(out)
    with pytest.raises(VfError) as info, staged_tree(out) as stage:
        stage.add("plan/dev.json", Chunks(iter(['{"a": "ok",', ' "b": "\ud800"}\n'])))
    assert info.value.code == "VF_OUTPUT_TEXT"
    assert _read_tree(out) == before
    assert not list(tmp_path.glob(".deploy.vf-new-*"))


def test_check_file_by_file_equals_the_whole_tree_diff(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    write_tree(out, {"a.yaml": "a: 1\n", "gone.yaml": "g\n", "same.yaml": "s\n"})
    new = {"a.yaml": "a: 2\n", "same.yaml": "s\n", "added.json": '{\n  "x": 1\n}\n'}
    check = TreeCheck(out)
    for rel, text in new.items():
        check.add(rel, Chunks(iter(text.splitlines(keepends=True))))
    streamed = check.diff()
    assert streamed == diff_tree(out, new)
    assert "-a: 1" in streamed and "+a: 2" in streamed
    assert "+++ /dev/null" in streamed and "+++ b/added.json" in streamed


GRAPH_SOURCE = (
    NODES
    + """

def build_flow():
    src = Src(name="src")
    return Flow([Sink(name="sink")(Work(name="work")(src))], flow_type=BATCH)
"""
)
REJECTED_LATER = """environments:
  dev:
    images: {default: r.io/a:1}
  prod:
    images: {default: r.io/a:1}
    requirements: {profiles: {src: replay_archive}}
"""


def test_an_environment_rejected_after_its_plan_file_leaves_no_tree(
    tmp_path: Path, write_graph: Callable[..., Path]
) -> None:
    """The plan file of each environment goes to the staging tree before its objects are
    checked (ADR 136): a rejection after it still leaves nothing, and the previous tree."""
    graph = write_graph(GRAPH_SOURCE, REJECTED_LATER)
    argv = [sys.executable, "-m", "vf", "compile", str(graph)]
    out = tmp_path / "new" / "deploy"
    done = subprocess.run([*argv, "--out", str(out)], capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "error[VF_ADMISSION_REJECTED]" in done.stderr
    assert not (tmp_path / "new").exists()
    kept = tmp_path / "deploy"
    first = subprocess.run(
        [*argv, "--out", str(kept), "--env", "dev"], capture_output=True, text=True, check=False
    )
    assert first.returncode == 0, first.stderr
    before = _read_tree(kept)
    for env_args in (["--env", "prod"], []):  # rejected first, and rejected after dev's files
        again = subprocess.run(
            [*argv, "--out", str(kept), *env_args], capture_output=True, text=True, check=False
        )
        assert again.returncode == 2, again.stderr
        assert _read_tree(kept) == before
    left = {p.name for p in tmp_path.iterdir()} - {"__pycache__"}  # the graph's bytecode
    assert sorted(left) == ["deploy", "graph.py", "vf.yaml"]
