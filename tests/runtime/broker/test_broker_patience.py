"""JetStream API steps at start-up wait out a broker that cannot answer yet (a cluster still
electing leaders times out) and end in a named error, never a traceback."""

from __future__ import annotations

import asyncio
import datetime
import json

import nats.errors
import pytest
from nats.js.api import ConsumerConfig, ConsumerInfo, PubAck, RawStreamMsg, SequenceInfo
from nats.js.errors import BadRequestError, NotFoundError

from vf_runtime.broker import client as broker
from vf_runtime.broker.client import BrokerError, delivered_before, patiently
from vf_runtime.broker.naming import RunNames
from vf_runtime.worker.tally import SharedTally


def test_a_step_that_times_out_is_asked_again_until_it_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(broker.asyncio, "sleep", _no_sleep)
    calls: list[int] = []

    async def step() -> None:
        calls.append(1)
        if len(calls) < 3:
            raise nats.errors.TimeoutError

    asyncio.run(patiently(step, what="stream s"))
    assert len(calls) == 3


def test_a_broker_that_never_answers_is_a_named_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broker, "API_PATIENCE", 0.0)

    async def step() -> None:
        raise nats.errors.TimeoutError

    with pytest.raises(BrokerError) as caught:
        asyncio.run(patiently(step, what="stream s"))
    assert caught.value.code == "VF_BROKER_API" and "stream s" in str(caught.value)


def test_other_errors_are_not_retried() -> None:
    async def step() -> None:
        raise BadRequestError

    with pytest.raises(BadRequestError):
        asyncio.run(patiently(step, what="stream s"))


async def _no_sleep(seconds: float) -> None:
    del seconds


class _SlowBroker:
    """Answers ``consumer_info`` only on its third ask, as a loaded broker can."""

    def __init__(self, delivered: int | None) -> None:
        self.asks = 0
        self.delivered = delivered

    async def consumer_info(self, stream: str, durable: str) -> ConsumerInfo:
        self.asks += 1
        if self.asks < 3:
            raise nats.errors.TimeoutError
        seq = None if self.delivered is None else SequenceInfo(self.delivered, self.delivered)
        return ConsumerInfo(
            name=durable,
            stream_name=stream,
            config=ConsumerConfig(durable_name=durable),
            created=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
            delivered=seq,
        )


@pytest.mark.parametrize(("delivered", "expected"), [(None, False), (0, False), (7, True)])
def test_whether_a_durable_delivered_before_waits_out_a_broker_that_times_out(
    monkeypatch: pytest.MonkeyPatch, delivered: int | None, expected: bool
) -> None:
    monkeypatch.setattr(broker.asyncio, "sleep", _no_sleep)
    js = _SlowBroker(delivered)
    assert asyncio.run(delivered_before(js, "s", "d")) is expected  # type: ignore[arg-type]
    assert js.asks == 3


class _SlowTallies:
    """Answers ``get_last_msg`` only on its third ask; every first tally is taken."""

    def __init__(self, earlier: bytes | None) -> None:
        self.asks = 0
        self.earlier = earlier
        self.published: list[bytes] = []

    async def get_last_msg(self, stream: str, subject: str) -> RawStreamMsg:
        if self.published:  # the tally just published, read back
            return RawStreamMsg(subject=subject, data=self.published[-1], seq=len(self.published))
        self.asks += 1
        if self.asks == 1:
            raise nats.errors.TimeoutError
        if self.asks == 2:
            raise TimeoutError  # what the lookup's own deadline raises
        if self.earlier is None:
            raise NotFoundError
        return RawStreamMsg(subject=subject, data=self.earlier)

    async def publish(self, subject: str, data: bytes) -> PubAck:
        self.published.append(data)
        return PubAck(stream="s", seq=len(self.published))

    async def purge_stream(self, stream: str, **kwargs: object) -> bool:
        return True


@pytest.mark.parametrize(("earlier", "exact"), [(None, True), (b'{"received":{}}', False)])
def test_a_replica_pooling_its_tally_waits_out_a_broker_that_times_out(
    monkeypatch: pytest.MonkeyPatch, earlier: bytes | None, exact: bool
) -> None:
    monkeypatch.setattr(broker.asyncio, "sleep", _no_sleep)
    js = _SlowTallies(earlier)
    tally = SharedTally(
        js,  # type: ignore[arg-type]
        names=RunNames(flow_id="f", run_id="r"),
        child="c",
        replica=0,
        replicas=2,
    )
    assert asyncio.run(tally.start("p")) is exact
    assert js.asks == 3
    assert json.loads(js.published[-1])["exact"] is exact
