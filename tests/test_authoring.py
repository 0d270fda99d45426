"""The public authoring API: a contract other code is written against."""

from __future__ import annotations

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
    [{"delivery": "exactly-once"}, {"dlq": "some"}, {"on_error": "retry"}, {"max_retries": -1}],
)
def test_invalid_delivery_policies_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(AuthoringError) as info:
        DeliveryPolicy(**kwargs)
    assert info.value.code == "VF_POLICY_DELIVERY"
