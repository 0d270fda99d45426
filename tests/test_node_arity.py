"""A node whose process()/consume() cannot take one input per parent is refused by vf validate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GRAPH = """
from vf import BATCH, Consumer, Flow, Processor, Producer


class Source(Producer):
    def next(self):
        raise StopIteration


class Half(Processor):
    def process(self, item):
        return item


class Pair(Processor):
    def process(self, item):  # two parents, one argument
        return item


class Sink(Consumer):
    def consume(self, *items):
        pass


def build_flow():
    source = Source(name="source")
    left, right = Half(name="left")(source), Half(name="right")(source)
    sink = Sink(name="sink")(Pair(name="pair")(left, right))
    return Flow([sink], flow_type=BATCH, flow_id="arity")
"""


def test_a_two_parent_join_taking_one_argument_is_refused_by_name(tmp_path: Path) -> None:
    graph = tmp_path / "graph.py"
    graph.write_text(GRAPH)
    (tmp_path / "vf.yaml").write_text(
        "environments:\n  dev:\n    images:\n      default: registry.example.com/x:1\n"
    )
    vf = str(Path(sys.executable).with_name("vf"))
    done = subprocess.run(
        [vf, "validate", str(graph)], capture_output=True, text=True, check=False, timeout=60
    )
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "error[VF_GRAPH_ARITY]" in output
    assert "Pair.process(item) cannot take 2 input(s)" in output
    assert "node 'pair'" in output
    assert "node 'sink'" not in output and "node 'left'" not in output
