"""The public authoring API: a contract other code is written against."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import vf
from vf import BATCH, REALTIME, Consumer, DeliveryPolicy, Flow, JoinPolicy, Processor, Producer
from vf_runtime import AuthoringError


class Numbers(Producer):
    def __init__(self, limit: int, **kw: Any) -> None:
        super().__init__(**kw)
        self.limit = limit
        self.sent = 0

    def next(self) -> int:
        if self.sent >= self.limit:
            raise StopIteration
        self.sent += 1
        return self.sent


class Add(Processor):
    def __init__(self, amount: int = 1, **kw: Any) -> None:
        super().__init__(**kw)
        self.amount = amount

    def process(self, value: int) -> int:
        return value + self.amount


class Collect(Consumer):
    def consume(self, value: int) -> None:
        pass


def test_vf_reexports_the_authoring_api_from_vf_runtime() -> None:
    import vf_runtime

    for name in ("Flow", "Producer", "Processor", "Consumer", "JoinPolicy", "DeliveryPolicy"):
        assert getattr(vf, name) is getattr(vf_runtime, name)
    assert (vf.BATCH, vf.REALTIME, vf.CPU, vf.GPU) == ("batch", "realtime", "cpu", "gpu")


def test_constructor_arguments_are_recorded_for_rebuild() -> None:
    node = Add(5, name="plus", nb_tasks=2)
    assert node.get_params() == {"amount": 5, "name": "plus", "nb_tasks": 2}
    rebuilt = Add(**node.get_params())
    assert (rebuilt.amount, rebuilt.name, rebuilt.nb_tasks) == (5, "plus", 2)


def test_producer_iterates_until_stop_iteration() -> None:
    assert list(Numbers(limit=3)) == [1, 2, 3]


def test_wiring_returns_the_child_and_keeps_parent_order() -> None:
    a, b = Numbers(limit=1, name="a"), Numbers(limit=1, name="b")
    join = Add(name="join")
    assert join(b, a) is join
    assert join.parents == (b, a)


def test_a_node_is_wired_once() -> None:
    source = Numbers(limit=1)
    child = Add()(source)
    with pytest.raises(AuthoringError) as info:
        child(source)
    assert info.value.code == "VF_GRAPH_REWIRED"


def test_flow_defaults_to_realtime_and_rejects_unknown_types() -> None:
    sink = Collect()(Numbers(limit=1))
    assert Flow([sink]).flow_type == REALTIME
    assert Flow(sink, flow_type=BATCH).consumers == (sink,)
    with pytest.raises(AuthoringError, match="flow_type"):
        Flow([sink], flow_type="stream")


def test_join_policy_defaults_follow_the_flow_type() -> None:
    assert JoinPolicy.default_for(BATCH).to_dict()["missing"] == "wait"
    assert JoinPolicy.default_for(BATCH).timeout_seconds is None
    realtime = JoinPolicy.default_for(REALTIME)
    assert (realtime.timeout_seconds, realtime.missing) == (10.0, "drop")


def test_join_policy_wait_clears_the_timeout() -> None:
    assert JoinPolicy(missing="wait", timeout_seconds=5).timeout_seconds is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"missing": "skip"},
        {"mode": "nearest"},
        {"mode": "time"},
        {"mode": "time", "tolerance_ms": 0},
        {"tolerance_ms": 10},
        {"mode": "time", "tolerance_ms": 5, "quorum": 1},
        {"mode": "time", "tolerance_ms": 5, "quorum": 0, "timeout_seconds": 1},
        {"mode": "time", "tolerance_ms": 5, "collect": {"a": 0}},
        {"max_pending": 0},
        {"timeout_seconds": -1},
    ],
)
def test_invalid_join_policies_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(AuthoringError) as info:
        JoinPolicy(**kwargs)
    assert info.value.code == "VF_POLICY_JOIN"


def test_delivery_policy_defaults_and_max_deliver() -> None:
    batch, live = DeliveryPolicy.default_for(BATCH), DeliveryPolicy.default_for(REALTIME)
    assert (batch.delivery, batch.dlq, batch.max_deliver) == ("at-least-once", "full", 4)
    assert (live.delivery, live.dlq, live.max_deliver) == ("best-effort", "sampled", 1)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"delivery": "exactly-once"},
        {"dlq": "some"},
        {"on_error": "retry"},
        {"max_retries": -1},
        {"call_timeout_seconds": -1},
        {"call_timeout_seconds": float("inf")},
        {"call_timeout_seconds": "60"},
    ],
)
def test_invalid_delivery_policies_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(AuthoringError) as info:
        DeliveryPolicy(**kwargs)
    assert info.value.code == "VF_POLICY_DELIVERY"


def test_a_call_bound_other_than_the_default_reaches_the_worker(tmp_path: Path) -> None:
    """``DeliveryPolicy(call_timeout_seconds=)`` is written as VF_CALL_TIMEOUT_SECONDS
    (DELIV-12), 0 included (no bound); the default is left to the worker, so a flow that
    declares none keeps its workloads, and its generation, as they were."""
    from vf.pipeline import CompileRequest, compile_project

    graph = tmp_path / "graph.py"
    graph.write_text(
        "from vf import BATCH, Consumer, DeliveryPolicy, Flow, Producer\n"
        "class Src(Producer):\n    def next(self):\n        raise StopIteration\n"
        "class Sink(Consumer):\n    def consume(self, item):\n        pass\n"
        "def build_flow():\n"
        "    src = Src(name='src')\n"
        "    a = Sink(name='a', delivery=DeliveryPolicy(call_timeout_seconds=0))(src)\n"
        "    b = Sink(name='b', delivery=DeliveryPolicy(call_timeout_seconds=45.5))(src)\n"
        "    c = Sink(name='c', delivery=DeliveryPolicy())(src)\n"
        "    return Flow([a, b, c], flow_type=BATCH, flow_id='bounded')\n",
        encoding="utf-8",
    )
    (tmp_path / "vf.yaml").write_text(
        "environments:\n  dev:\n    images:\n      default: registry.example.com/t/w:1\n",
        encoding="utf-8",
    )
    result = compile_project(CompileRequest(graph=str(graph)))
    env = {w.node: dict(w.env) for w in result.plans[0].workloads}
    assert env["a"]["VF_CALL_TIMEOUT_SECONDS"] == "0"
    assert env["b"]["VF_CALL_TIMEOUT_SECONDS"] == "45.5"
    assert "VF_CALL_TIMEOUT_SECONDS" not in env["c"]
