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


def test_the_verdict_follows_each_node_class_and_each_parent_count() -> None:
    """The verdict is read once per class, method and parent count (the compile lowers
    thousands of nodes of a few classes), yet a node's own ``process`` is still judged."""
    from vf_runtime.nodes import Processor
    from vf_runtime.signature import arity_problem

    class One(Processor):
        def process(self, item: object) -> object:
            return item

    class Two(Processor):
        def process(self, left: object, right: object) -> object:
            return left

    one, other, two = One(name="a"), One(name="b"), Two(name="c")
    assert arity_problem(one, parents=1) is None
    assert arity_problem(other, parents=2) is not None
    assert arity_problem(two, parents=2) is None
    assert arity_problem(two, parents=1) is not None
    own = One(name="d")
    own.process = lambda left, right: left  # type: ignore[method-assign]
    assert arity_problem(own, parents=2) is None
    assert arity_problem(One(name="e"), parents=2) is not None
