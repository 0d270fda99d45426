"""Same input, byte-identical tree: across runs, processes, hash seeds and declaration order."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import EXAMPLE_NAMES, REPO, example_graph
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.tree.write import with_manifest


def _read_tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_compiling_twice_gives_the_same_tree(
    example: str, compiled_examples: dict[str, CompileResult]
) -> None:
    again = compile_project(CompileRequest(graph=example_graph(example)))
    assert again.tree == compiled_examples[example].tree


@pytest.mark.parametrize("seed", ["0", "4242"])
def test_other_hash_seed_in_a_subprocess_gives_the_same_bytes(
    seed: str, compiled_examples: dict[str, CompileResult], tmp_path: Path
) -> None:
    example = "realtime_cameras"
    out = tmp_path / "deploy"
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-m", "vf", "compile", example_graph(example), "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert _read_tree(out) == with_manifest(compiled_examples[example].tree)


NODES = """
from vf import BATCH, Consumer, Flow, Processor, Producer


class Src(Producer):
    def next(self):
        raise StopIteration


class Step(Processor):
    def process(self, *inputs):
        return inputs[0]


class Sink(Consumer):
    def consume(self, *inputs):
        pass
"""

FORWARD = """
def build_flow():
    a = Src(name="a")
    b = Src(name="b")
    left = Step(name="left")(a)
    right = Step(name="right", nb_tasks=2)(b)
    join = Step(name="join", nb_tasks=2, partition_by="trace_id")(left, right)
    return Flow([Sink(name="s1")(join), Sink(name="s2")(left)], flow_type=BATCH, flow_id="order")
"""

REVERSED = """
def build_flow():
    b = Src(name="b")
    a = Src(name="a")
    right = Step(name="right", nb_tasks=2)(b)
    left = Step(name="left")(a)
    join = Step(name="join", nb_tasks=2, partition_by="trace_id")(left, right)
    s2 = Sink(name="s2")(left)
    return Flow([s2, Sink(name="s1")(join)], flow_type=BATCH, flow_id="order")
"""

CONFIG = "environments:\n  dev:\n    images:\n      default: registry.example.com/app:1\n"


def test_declaration_order_does_not_change_the_tree(tmp_path: Path) -> None:
    trees = []
    for label, body in (("forward", FORWARD), ("reversed", REVERSED)):
        folder = tmp_path / label
        folder.mkdir()
        (folder / "graph.py").write_text(NODES + body, encoding="utf-8")
        (folder / "vf.yaml").write_text(CONFIG, encoding="utf-8")
        trees.append(compile_project(CompileRequest(graph=str(folder / "graph.py"))).tree)
    assert trees[0] == trees[1]


def test_no_machine_data_in_the_tree(compiled_examples: dict[str, CompileResult]) -> None:
    volatile = {str(REPO), socket.gethostname(), os.path.expanduser("~")}
    for result in compiled_examples.values():
        for path, text in result.tree.items():
            for item in (v for v in volatile if len(v) >= 6):
                assert item not in text, (path, item)
