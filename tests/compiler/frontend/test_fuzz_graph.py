"""Property-based fuzzing of graph construction: every case compiles or fails by name.

Each generated case is a graph spec (node kinds, names, keyword arguments, wiring, flow
settings) that a fixed graph module turns into a Flow, so the compiler facade loads it the
way it loads any user's module. Names come from pools with every odd character class and
deliberate collisions; keyword arguments include wrong types, extreme numbers, bad
policies, GPU combinations and values JSON cannot carry; wiring may form cycles. The
property: ``compile_project`` either returns a tree whose plans and YAML parse, or raises
a ``VfError`` with a code, a fix and exit code 2. Nothing else, ever.
"""

from __future__ import annotations

import json
import pickle
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vf.cli import cli
from vf.errors import EXIT_USER, VfError
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.tree.write import MANIFEST
from vf.verify.checks import CONFIGMAP_MAX_BYTES

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

NODES_MODULE = '''"""Node classes and the interpreter of the fuzz tests' graph specs."""

import math

from vf import Consumer, DeliveryPolicy, Flow, JoinPolicy, Processor, Producer


class FuzzProducer(Producer):
    def __init__(self, *, name=None, image=None, is_finite=True, **params):
        super().__init__(name=name, image=image, is_finite=is_finite)

    def next(self):
        raise StopIteration


class FuzzProcessor(Processor):
    def __init__(self, *, name=None, image=None, nb_tasks=1, device_type="cpu", gpu_count=1,
                 gpu_memory_gib=None, partition_by=None, join_policy=None, delivery=None,
                 **params):
        super().__init__(name=name, image=image, nb_tasks=nb_tasks, device_type=device_type,
                         gpu_count=gpu_count, gpu_memory_gib=gpu_memory_gib,
                         partition_by=partition_by, join_policy=join_policy, delivery=delivery)

    def process(self, *inputs):
        return inputs[0]


class FuzzConsumer(Consumer):
    def __init__(self, *, name=None, image=None, join_policy=None, delivery=None,
                 idempotent=False, partition_by=None, **params):
        super().__init__(name=name, image=image, join_policy=join_policy, delivery=delivery,
                         idempotent=idempotent, partition_by=partition_by)

    def consume(self, *inputs):
        pass


class Opaque:
    pass


def materialise(value):
    if isinstance(value, tuple) and len(value) == 3 and value[0] == "__marker__":
        kind, arg = value[1], value[2]
        if kind == "nan":
            return math.nan
        if kind == "inf":
            return math.inf * arg
        if kind == "opaque":
            return Opaque()
        if kind == "deep":
            nested = []
            for _ in range(arg):
                nested = [nested]
            return nested
        if kind == "huge":
            return "x" * arg
        if kind == "join":
            return JoinPolicy(**materialise(arg))
        if kind == "delivery":
            return DeliveryPolicy(**materialise(arg))
    if isinstance(value, list):
        return [materialise(v) for v in value]
    if isinstance(value, dict):
        return {k: materialise(v) for k, v in value.items()}
    return value


CLASSES = {"producer": FuzzProducer, "processor": FuzzProcessor, "consumer": FuzzConsumer}


def build(spec):
    nodes = [CLASSES[kind](**materialise(kwargs)) for kind, kwargs in spec["nodes"]]
    for index, parents in spec["wiring"]:
        nodes[index](*[nodes[p] for p in parents])
    return Flow([nodes[i] for i in spec["consumers"]], **materialise(spec["flow"]))
'''

GRAPH_MODULE = '''"""A generated graph: the spec next to this file, built by fuzz_nodes."""

import pickle
from pathlib import Path

from fuzz_nodes import build


def build_flow():
    return build(pickle.loads((Path(__file__).parent / "spec.pkl").read_bytes()))
'''

CONFIG = """flow_id: fuzz
environments:
  dev:
    namespace: fuzz-dev
    images: {default: registry.example.com/fuzz/worker:1}
  prod:
    namespace: fuzz
    images: {default: registry.example.com/fuzz/worker@sha256:%s}
    broker: {profile: durable}
    payload_store: {profile: durable}
""" % ("b" * 64)
BASE_KEYWORDS = {
    "name", "image", "is_finite", "nb_tasks", "device_type", "gpu_count", "gpu_memory_gib",
    "partition_by", "join_policy", "delivery", "idempotent", "warmup_seconds",
}  # fmt: skip
ODD_NAMES = [
    "a.b", "a_b", "a-b", "A-b", "A_B", "-x", "x-", ".x", "x.", "{{x}}", "a:b", "a b",
    "$(rm -rf /)", "`id`", "名前", "a\nb", "a\tb", "x" * 128, "y" * 129, "", " ",
    "node*", "a/b", "a>b", "#x", "on", "yes", "0755", "1e3", "null", "~", "a\x00b",
]  # fmt: skip


def marker(kind: str, arg: Any = None) -> tuple[str, str, Any]:
    return ("__marker__", kind, arg)


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` nine times in ten: enough valid graphs compile for their trees to be checked."""
    return st.integers(0, 9).flatmap(lambda i: bad if i == 9 else good)


UNIQUE = "<unique>"  # replaced by a name unique in the graph
valid_names = st.from_regex(r"\A[a-z][a-z0-9-]{0,10}[a-z0-9]\Z")
names = mostly(
    st.just(UNIQUE),
    st.one_of(
        st.none(),
        st.sampled_from(ODD_NAMES),
        st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9_.-]{0,12}[A-Za-z0-9]\Z"),
        st.text(max_size=16),
        st.sampled_from([1, 2.5, ("t",)]),
    ),
)
json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=24),
)
non_json = st.one_of(
    st.just(marker("nan")),
    st.sampled_from([marker("inf", 1), marker("inf", -1)]),
    st.just(marker("opaque")),
    st.sampled_from([marker("deep", 50), marker("deep", 3000)]),
    st.sampled_from([b"bytes", {1, 2}, {1: "int key"}, {("t",): 1}, frozenset(), 10**2000]),
    st.sampled_from(["\ud800", "ok\udfffno"]),
    st.just(marker("huge", 1_100_000)),
)
param_values = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
params = st.dictionaries(
    st.text(min_size=1, max_size=10).filter(lambda k: k not in BASE_KEYWORDS),
    mostly(param_values, non_json),
    max_size=3,
)
positive_or_not = mostly(
    st.integers(min_value=1, max_value=4),
    st.one_of(
        st.integers(min_value=-2, max_value=0),
        st.sampled_from([10**9, True, 1.5, "2", None, marker("nan")]),
    ),
)
valid_join = st.builds(
    lambda kw: marker("join", kw),
    st.fixed_dictionaries(
        {},
        optional={
            "timeout_seconds": st.sampled_from([None, 0.5, 10]),
            "missing": st.sampled_from(["drop", "wait", "error"]),
            "max_pending": st.sampled_from([1, 256, 2**40]),
        },
    ),
)
wild_join = st.one_of(
    st.sampled_from(["fifo", 1, {"missing": "drop"}]),
    st.builds(
        lambda kw: marker("join", kw),
        st.fixed_dictionaries(
            {},
            optional={
                "timeout_seconds": st.sampled_from([None, -1, 0, 0.5, marker("nan")]),
                "missing": st.sampled_from(["drop", "wait", "x"]),
                "max_pending": st.sampled_from([0, 1, -5]),
                "mode": st.sampled_from(["trace", "time", "x"]),
                "tolerance_ms": st.sampled_from([None, 0, 5.0, -1]),
                "quorum": st.sampled_from([None, 0, 1, 3]),
                "collect": st.sampled_from(
                    [None, {"p0": 5.0}, {1: 2.0}, {"zz": -1}, (("a", 1.0), (1, 2.0))]
                ),
            },
        ),
    ),
)
join_policies = mostly(st.one_of(st.none(), valid_join), wild_join)
valid_delivery = st.builds(
    lambda kw: marker("delivery", kw),
    st.fixed_dictionaries(
        {},
        optional={
            "delivery": st.sampled_from(["at-least-once", "best-effort"]),
            "max_retries": st.sampled_from([0, 3, 100]),
            "dlq": st.sampled_from(["full", "sampled", "off"]),
            "on_error": st.sampled_from([None, "poison", "transient", "worker_fatal"]),
        },
    ),
)
wild_delivery = st.one_of(
    st.sampled_from(["at-least-once", 3]),
    st.builds(
        lambda kw: marker("delivery", kw),
        st.fixed_dictionaries(
            {},
            optional={
                "delivery": st.sampled_from(["exactly", "best-effort"]),
                "max_retries": st.sampled_from([101, -1, True]),
                "dlq": st.sampled_from(["none"]),
                "on_error": st.sampled_from(["boom"]),
                "sample_per_minute": st.sampled_from([0, 5]),
            },
        ),
    ),
)
deliveries = mostly(st.one_of(st.none(), valid_delivery), wild_delivery)
images = mostly(
    st.sampled_from([None, "registry.example.com/x:1", "r.example.com/x@sha256:" + "a" * 64]),
    st.one_of(
        st.sampled_from(
            [
                "",
                "{{ .Values.image }}",
                "img; rm -rf /",
                "img\nkind: Secret",
                "UPPER/Case:tag",
                "x" * 600,
            ]
        ),
        st.text(max_size=20),
    ),
)
common = {
    "image": images,
    "join_policy": join_policies,
    "delivery": deliveries,
}
bad_partition_keys = st.sampled_from(["", 5, "a b", "key.{{x}}", "k\x00", "trace_id"])
producer_kwargs = st.fixed_dictionaries(
    {"name": names},
    optional={"image": images, "is_finite": mostly(st.booleans(), st.sampled_from(["yes", 0]))},
)
processor_kwargs = st.fixed_dictionaries(
    {"name": names},
    optional={
        **common,
        "partition_by": mostly(st.sampled_from([None, "trace_id", "camera"]), bad_partition_keys),
        "nb_tasks": positive_or_not,
        "device_type": mostly(st.sampled_from(["cpu", "gpu"]), st.sampled_from(["tpu", "", 3])),
        "gpu_count": positive_or_not,
        "gpu_memory_gib": mostly(
            st.sampled_from([None, 0.5, 10, 40]),
            st.sampled_from([0, -1, 81, 1e308, "10", marker("nan"), marker("inf", 1)]),
        ),
    },
)
consumer_kwargs = st.fixed_dictionaries(
    {"name": names},
    optional={
        **common,
        "partition_by": mostly(st.none(), bad_partition_keys),
        "idempotent": mostly(st.booleans(), st.just(1)),
    },
)
flow_settings = st.fixed_dictionaries(
    {},
    optional={
        "flow_type": mostly(
            st.sampled_from(["batch", "realtime"]), st.sampled_from(["BATCH", "stream", None])
        ),
        "flow_id": mostly(
            st.one_of(st.none(), valid_names), st.one_of(st.sampled_from(ODD_NAMES), st.just(7))
        ),
    },
)


@st.composite
def graph_specs(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly a valid DAG; now and then back edges, repeated parents, consumers as parents."""
    count = draw(st.integers(min_value=1, max_value=7))
    kinds = ["producer"] + [
        draw(st.sampled_from(["processor", "producer", "processor", "consumer"]))
        for _ in range(count - 1)
    ]
    if draw(st.integers(0, 9)) < 9:
        kinds.append("consumer")
    kwargs_for = {"producer": producer_kwargs, "processor": processor_kwargs}
    nodes = []
    for index, kind in enumerate(kinds):
        kwargs = {**draw(kwargs_for.get(kind, consumer_kwargs)), **draw(params)}
        if kwargs["name"] == UNIQUE:
            kwargs["name"] = f"{kind[:4]}-{index}"
        nodes.append((kind, kwargs))
    wiring = []
    for index, kind in enumerate(kinds):
        wild = draw(st.integers(0, 19)) == 19
        if kind == "producer" and not wild:
            continue
        pool = [i for i in range(index) if kinds[i] != "consumer"]
        pool = list(range(len(kinds))) if wild or not pool else pool
        parents = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=not wild))
        wiring.append((index, parents))
    sinks = [i for i, kind in enumerate(kinds) if kind == "consumer"]
    consumers = draw(mostly(st.just(sinks), st.lists(st.integers(0, len(kinds) - 1))))
    return {"nodes": nodes, "wiring": wiring, "consumers": consumers, "flow": draw(flow_settings)}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("fuzz-graph")
    (root / "fuzz_nodes.py").write_text(NODES_MODULE, encoding="utf-8")
    (root / "graph.py").write_text(GRAPH_MODULE, encoding="utf-8")
    (root / "vf.yaml").write_text(CONFIG, encoding="utf-8")
    yield root


def compile_spec(root: Path, spec: dict[str, Any]) -> CompileResult | VfError:
    """Compile one spec through the facade: the result, or the VfError it raised."""
    (root / "spec.pkl").write_bytes(pickle.dumps(spec))
    try:
        return compile_project(CompileRequest(graph=str(root / "graph.py")))
    except VfError as error:
        return error


def assert_named_failure(error: VfError) -> None:
    assert error.exit_code == EXIT_USER, error.render()
    for problem in error.problems:
        assert problem.code.startswith("VF_") and problem.code.isupper()
        assert problem.remedy.strip() and problem.what.strip()
    assert "Traceback" not in error.render()


def assert_valid_tree(result: CompileResult) -> None:
    assert result.tree
    for path, text in result.tree.items():
        assert text.endswith("\n") and "\r" not in text, path
        text.encode("utf-8")  # what the writer does: an unpaired surrogate cannot be written
        if path.endswith(".json"):
            json.loads(text)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(spec=graph_specs())
def test_any_graph_compiles_or_fails_by_name(project: Path, spec: dict[str, Any]) -> None:
    outcome = compile_spec(project, spec)
    if isinstance(outcome, VfError):
        assert_named_failure(outcome)
    else:
        assert_valid_tree(outcome)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=graph_specs())
def test_the_cli_exits_0_or_2_and_writes_only_on_success(
    project: Path, spec: dict[str, Any]
) -> None:
    out = project / "out"
    shutil.rmtree(out, ignore_errors=True)
    (project / "spec.pkl").write_bytes(pickle.dumps(spec))
    result = CliRunner().invoke(cli, ["compile", str(project / "graph.py"), "--out", str(out)])
    assert result.exit_code in (0, EXIT_USER), result.output
    assert "Traceback" not in result.output and "VF_INTERNAL" not in result.output
    if result.exit_code == 0:
        assert (out / MANIFEST).is_file()
    else:
        assert "error[VF_" in result.output and "= fix: " in result.output
        assert not out.exists()
    assert not list(project.glob(".out.vf-new-*"))


CHAIN = '''"""A single chain of 5,000 nodes: deeper than Python's default recursion limit."""

from vf import BATCH, Consumer, Flow, Processor, Producer


class Src(Producer):
    def next(self):
        raise StopIteration


class Step(Processor):
    def process(self, item):
        return item


class Sink(Consumer):
    def consume(self, item):
        pass


def build_flow():
    node = Src(name="src")
    for index in range(4998):
        node = Step(name=f"s{index}")(node)
    return Flow([Sink(name="sink")(node)], flow_type=BATCH)
'''


def test_a_5000_deep_chain_compiles(tmp_path: Path) -> None:
    (tmp_path / "graph.py").write_text(CHAIN, encoding="utf-8")
    (tmp_path / "vf.yaml").write_text(
        "environments:\n  dev:\n    images: {default: registry.example.com/chain/w:1}\n",
        encoding="utf-8",
    )
    result = compile_project(CompileRequest(graph=str(tmp_path / "graph.py")))
    assert len(result.graph.nodes) == 5000
    assert [n.name for n in result.graph.nodes[:2]] == ["src", "s0"]
    assert result.graph.nodes[-1].name == "sink"
    assert len(result.plans[0].workloads) == 5000
    assert_valid_tree(result)
    largest = max(len(json.dumps(obj)) for obj in result.objects["dev"])
    assert largest < CONFIGMAP_MAX_BYTES  # no single object grows with the graph
