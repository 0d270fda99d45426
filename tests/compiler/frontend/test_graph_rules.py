"""Every graph rule: a named error, exit code 2, the user's location, nothing written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from vf.cli import cli

PREAMBLE = """
from vf import BATCH, GPU, REALTIME, Consumer, DeliveryPolicy, Flow, JoinPolicy, Processor, Producer


class Src(Producer):
    def next(self):
        raise StopIteration


class Work(Processor):
    def process(self, *inputs):
        return inputs[0]


class Sink(Consumer):
    def consume(self, *inputs):
        pass


def build_flow():
"""

CONFIG = "environments:\n  dev:\n    images:\n      default: registry.example.com/app:1\n"

CASES = {
    "root-not-producer": ("VF_GRAPH_ROOT", "    w = Work()\n    return Flow([Sink()(w)])"),
    "cycle": (
        "VF_GRAPH_CYCLE",
        "    a = Work(name='a')\n    b = Work(name='b')(a)\n    a(b, Src())\n"
        "    return Flow([Sink()(b)])",
    ),
    "duplicate-name": (
        "VF_GRAPH_DUPLICATE_NAME",
        "    s = Src()\n    return Flow([Sink()(Work(name='x')(Work(name='x')(s)))])",
    ),
    "ambiguous-default-name": (
        "VF_GRAPH_AMBIGUOUS_NAME",
        "    s = Src()\n    return Flow([Sink()(Work()(Work()(s)))])",
    ),
    "broker-collision": (
        "VF_IDENTITY_COLLISION",
        "    s = Src()\n    return Flow([Sink()(Work(name='a.b')(Work(name='a_b')(s)))])",
    ),
    "k8s-collision": (
        "VF_IDENTITY_COLLISION",
        "    s = Src()\n    return Flow([Sink()(Work(name='Node')(Work(name='node')(s)))])",
    ),
    "join-needs-partition": (
        "VF_GRAPH_JOIN_PARTITION",
        "    a, b = Src(name='a'), Src(name='b')\n"
        "    return Flow([Sink()(Work(nb_tasks=2)(a, b))])",
    ),
    "consumer-partition": (
        "VF_GRAPH_CONSUMER_PARTITION",
        "    return Flow([Sink(partition_by='trace_id')(Src())])",
    ),
    "params-not-json": (
        "VF_GRAPH_PARAMS",
        "    class_ = Work\n    w = Weird(handle=object())(Src())\n    return Flow([Sink()(w)])",
    ),
    "local-class": (
        "VF_GRAPH_NODE_CLASS",
        "    class Local(Work):\n        pass\n    return Flow([Sink()(Local()(Src()))])",
    ),
    "gpu-memory-needs-gpu": (
        "VF_GRAPH_GPU",
        "    return Flow([Sink()(Work(gpu_memory_gib=4)(Src()))])",
    ),
    "gpu-memory-with-count": (
        "VF_GRAPH_GPU",
        "    w = Work(device_type=GPU, gpu_count=2, gpu_memory_gib=4)\n"
        "    return Flow([Sink()(w(Src()))])",
    ),
    "gpu-count-positive": (
        "VF_GRAPH_GPU",
        "    return Flow([Sink()(Work(device_type=GPU, gpu_count=0)(Src()))])",
    ),
    "nb-tasks-positive": (
        "VF_GRAPH_NB_TASKS",
        "    return Flow([Sink()(Work(nb_tasks=0)(Src()))])",
    ),
    "nb-tasks-bool": (
        "VF_GRAPH_NB_TASKS",
        "    return Flow([Sink()(Work(nb_tasks=True)(Src()))])",
    ),
    "invalid-join-policy": (
        "VF_POLICY_JOIN",
        "    return Flow([Sink(join_policy=JoinPolicy(missing='skip'))(Src())])",
    ),
    "join-policy-wrong-type": (
        "VF_POLICY_JOIN",
        "    return Flow([Sink(join_policy={'missing': 'drop'})(Src())])",
    ),
    "invalid-delivery": (
        "VF_POLICY_DELIVERY",
        "    return Flow([Sink(delivery=DeliveryPolicy(dlq='most'))(Src())])",
    ),
    "time-join-replicated": (
        "VF_POLICY_JOIN",
        "    a, b = Src(name='a'), Src(name='b')\n"
        "    j = JoinPolicy(mode='time', tolerance_ms=5)\n"
        "    w = Work(nb_tasks=2, partition_by='trace_id', join_policy=j)(a, b)\n"
        "    return Flow([Sink()(w)])",
    ),
    "bad-name": (
        "VF_GRAPH_NAME",
        "    return Flow([Sink(name='bad name!')(Src())])",
    ),
    "not-a-consumer": ("VF_GRAPH_NOT_CONSUMER", "    return Flow([Work()(Src())])"),
    "producer-with-parents": (
        "VF_GRAPH_PRODUCER_PARENTS",
        "    a = Src(name='a')\n    return Flow([Sink()(Src(name='b')(a))])",
    ),
    "bad-flow-type": ("VF_GRAPH_FLOW_TYPE", "    return Flow([Sink()(Src())], flow_type='x')"),
    "bad-flow-id": ("VF_GRAPH_FLOW_ID", "    return Flow([Sink()(Src())], flow_id='Not Valid')"),
}

EXTRA = """

class Weird(Processor):
    def __init__(self, handle, **kw):
        super().__init__(**kw)
        self.handle = handle

    def process(self, x):
        return x
"""


def _compile(graph: Path, out: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["compile", str(graph), "--out", str(out)])
    return result.exit_code, result.output


@pytest.mark.parametrize("case", sorted(CASES))
def test_graph_rule_is_reported_by_name(
    case: str, write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    code, body = CASES[case]
    graph = write_graph(PREAMBLE + body + "\n" + EXTRA, CONFIG)
    out = tmp_path / "deploy"
    exit_code, output = _compile(graph, out)
    assert exit_code == 2, output
    assert f"error[{code}]" in output
    assert "= fix:" in output
    assert "Traceback" not in output
    assert not out.exists()
    assert not list(tmp_path.glob(".deploy*"))


def test_errors_point_at_the_users_line(write_graph: Callable[..., Path], tmp_path: Path) -> None:
    graph = write_graph(PREAMBLE + "    return Flow([Sink()(Work(nb_tasks=0)(Src()))])\n", CONFIG)
    exit_code, output = _compile(graph, tmp_path / "deploy")
    line = PREAMBLE.count("\n") + 1
    assert exit_code == 2
    assert f"graph.py:{line} (node 'work')" in output


def test_every_problem_is_reported_in_one_pass(
    write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    body = (
        "    w = Work(nb_tasks=0, device_type='tpu')(Src())\n"
        "    return Flow([Sink(partition_by='x')(w)])\n"
    )
    exit_code, output = _compile(write_graph(PREAMBLE + body, CONFIG), tmp_path / "deploy")
    assert exit_code == 2
    for code in ("VF_GRAPH_NB_TASKS", "VF_GRAPH_DEVICE", "VF_GRAPH_CONSUMER_PARTITION"):
        assert f"error[{code}]" in output
    assert "3 problems found" in output


def test_a_node_without_an_image_names_the_fix(
    write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    graph = write_graph(PREAMBLE + "    return Flow([Sink()(Src())])\n")
    exit_code, output = _compile(graph, tmp_path / "deploy")
    assert exit_code == 2
    assert "error[VF_CONFIG_NO_IMAGE]" in output
    assert "images.default" in output


@pytest.mark.parametrize(
    ("source", "code"),
    [
        ("def build_flow(:\n", "VF_LOAD_IMPORT_FAILED"),
        ("import not_a_module_anywhere\n", "VF_LOAD_IMPORT_FAILED"),
        ("x = 1\n", "VF_LOAD_NO_FACTORY"),
        ("def build_flow():\n    raise RuntimeError('boom')\n", "VF_LOAD_FACTORY_FAILED"),
        ("def build_flow():\n    return 42\n", "VF_LOAD_FACTORY_TYPE"),
        ("import sys\nsys.exit(3)\n", "VF_LOAD_EXIT"),
    ],
)
def test_broken_graph_modules_get_named_errors(
    source: str, code: str, write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    exit_code, output = _compile(write_graph(source, CONFIG), tmp_path / "deploy")
    assert exit_code == 2, output
    assert f"error[{code}]" in output
    assert "vf/frontend/load.py" not in output


def test_a_factory_error_shows_the_users_frame(
    write_graph: Callable[..., Path], tmp_path: Path
) -> None:
    source = "def helper():\n    raise KeyError('camera')\n\n\ndef build_flow():\n    helper()\n"
    exit_code, output = _compile(write_graph(source, CONFIG), tmp_path / "deploy")
    assert exit_code == 2
    assert "graph.py:2" in output
    assert "KeyError" in output


def test_missing_graph_module(tmp_path: Path) -> None:
    exit_code, output = _compile(tmp_path / "nope.py", tmp_path / "deploy")
    assert exit_code == 2
    assert "error[VF_LOAD_NOT_FOUND]" in output


def test_factory_can_be_named(write_graph: Callable[..., Path], tmp_path: Path) -> None:
    source = PREAMBLE.replace("def build_flow", "def other") + "    return Flow([Sink()(Src())])\n"
    graph = write_graph(source, CONFIG)
    exit_code, output = _compile(Path(f"{graph}:other"), tmp_path / "deploy")
    assert exit_code == 0, output
    assert (tmp_path / "deploy" / "plan" / "dev.json").is_file()
