"""JetStream API steps at start-up wait out a broker that cannot answer yet (a cluster still
electing leaders times out) and end in a named error, never a traceback."""

from __future__ import annotations

import asyncio

import nats.errors
import pytest
from nats.js.errors import BadRequestError

from vf_runtime.broker import client as broker
from vf_runtime.broker.client import BrokerError, patiently


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
