"""The worker's hot path: its protocol writes equal nats-py's, and its shortcuts agree with the
general code they stand in for."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from typing import Any

import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg

from vf_runtime.broker.jsacks import AckInbox
from vf_runtime.broker.protocol import hpub, publish_empty
from vf_runtime.wire import (
    ABORT,
    DATA,
    Envelope,
    ErrorInfo,
    decode_envelope,
    encode_envelope,
    encode_payload,
)
from vf_runtime.wire.codec import VERSION, data_envelope
from vf_runtime.worker.inputs import redelivered
from vf_runtime.worker.nodethread import NodeThread, NotStarted
from vf_runtime.worker.window import Window


class _Recorder(Client):
    """A client that looks connected and keeps what it would have written."""

    def __init__(self) -> None:
        super().__init__()
        self._status = Client.CONNECTED
        self._max_payload = 1024 * 1024
        self.written: list[bytes] = []

    async def _send_command(self, cmd: bytes, priority: bool = False) -> None:
        self.written.append(bytes(cmd))


def _written(run: Any) -> bytes:
    client = _Recorder()
    asyncio.run(run(client))
    return b"".join(client.written)


def test_hpub_writes_what_nats_py_writes() -> None:
    headers = {"Nats-Msg-Id": "0123456789abcdef0123456789abcdef", "VF-Env": "4"}
    data = b"\x00payload\r\n" * 10

    async def ours(client: Client) -> None:
        await hpub(client, "vf.f.r.node.data", data, reply="_INBOX.x.1", headers=headers)

    async def theirs(client: Client) -> None:
        await client.publish("vf.f.r.node.data", data, reply="_INBOX.x.1", headers=headers)

    assert _written(ours) == _written(theirs)


def test_batched_acks_write_what_one_ack_each_writes() -> None:
    replies = [f"$JS.ACK.s.c.1.{n}.{n}.1700000000000000000.0" for n in range(1, 4)]

    async def ours(client: Client) -> None:
        await publish_empty(client, replies)

    async def theirs(client: Client) -> None:
        for reply in replies:
            await client.publish(reply)

    assert _written(ours) == _written(theirs)


def test_a_client_that_is_not_connected_goes_through_publish() -> None:
    client = _Recorder()
    client._status = Client.RECONNECTING
    client._max_pending_size = 0  # no buffering: publish refuses, and the ack is only logged
    asyncio.run(publish_empty(client, ["$JS.ACK.s.c.1.1.1.1700000000000000000.0"]))
    assert client.written == []


@pytest.mark.parametrize(
    ("reply", "again"),
    [
        ("$JS.ACK.stream.consumer.1.10.10.1700000000000000000.5", False),
        ("$JS.ACK.stream.consumer.3.10.12.1700000000000000000.0", True),
        ("$JS.ACK.domain.hash.stream.consumer.1.10.10.1700000000000000000.5.token", False),
        ("$JS.ACK.domain.hash.stream.consumer.2.10.10.1700000000000000000.5.token", True),
    ],
)
def test_redelivery_is_read_from_the_ack_subject(reply: str, again: bool) -> None:
    msg = Msg(_client=None, subject="x", reply=reply)  # type: ignore[arg-type]
    assert redelivered(msg) is again
    assert (msg.metadata.num_delivered > 1) is again


@pytest.mark.parametrize(
    ("data", "outcome"),
    [
        (b'{"stream":"vf-a","seq":7}', False),
        (b'{"stream":"vf-a","seq":7,"duplicate":true}', True),
        (b'{"stream":"error","seq":7}', False),
        (
            b'{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}',
            None,
        ),
    ],
)
def test_publish_acks_are_read_as_the_json_says(data: bytes, outcome: bool | None) -> None:
    async def read() -> asyncio.Future[bool]:
        inbox = AckInbox(_Recorder())
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        inbox.waiting["1"] = future
        await inbox._on_reply(Msg(_client=None, subject=inbox.prefix + "1", data=data))  # type: ignore[arg-type]
        return future

    future = asyncio.run(read())
    if outcome is None:
        assert future.exception() is not None
    else:
        assert future.result() is outcome


def test_data_envelopes_equal_the_dataclass_built_ones() -> None:
    payload_type, payload = encode_payload({"i": 1, "pad": b"x" * 10})
    fields: dict[str, Any] = dict(
        producer="p",
        flow_id="f",
        run_id="r",
        trace_id="t",
        seq=3,
        event_ts=1.5,
        replica_id=2,
        metadata={"proctime": 0.1},
        payload_type=payload_type,
        payload=payload,
    )
    fast = data_envelope(**fields)
    assert fast == Envelope(type=DATA, **fields)
    assert decode_envelope(encode_envelope(fast)) == fast


_SET_BY_DATA_ENVELOPE = {"type", "span_id", "parent_span_id", "error", "version"}


def test_assembled_envelopes_are_the_constructor_s_field_for_field() -> None:
    """The codec fills the envelopes it decodes or builds on the hot path without running
    ``__init__`` (``codec._assemble``): they must hold exactly the fields the constructor
    sets, stay frozen and compare alike."""
    error = ErrorInfo(code="C", message="m", remedy="r", disposition="poison", node="n")
    values: dict[str, Any] = {
        "type": ABORT, "producer": "p", "flow_id": "f", "run_id": "r", "trace_id": "t",
        "seq": 9, "event_ts": 2.5, "span_id": "s", "parent_span_id": "q", "replica_id": 1,
        "metadata": {"k": 1}, "payload_type": "", "payload": b"", "error": error,
        "version": VERSION,
    }  # fmt: skip
    assert set(values) == {f.name for f in dataclasses.fields(Envelope)}
    built = Envelope(**values)
    decoded = decode_envelope(encode_envelope(built))
    assert vars(decoded) == vars(built) and decoded == built
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded.seq = 10  # type: ignore[misc]
    data = {**values, "type": DATA, "span_id": "", "parent_span_id": "", "error": None}
    fast = data_envelope(**{k: v for k, v in data.items() if k not in _SET_BY_DATA_ENVELOPE})
    assert vars(fast) == vars(Envelope(**data))


def test_node_thread_hands_back_each_result_as_its_call_returns() -> None:
    async def run() -> list[float]:
        thread = NodeThread("test")
        started = time.monotonic()
        futures = thread.submit_many(time.sleep, [(0.0,), (0.3,)])
        await futures[0]
        first = time.monotonic() - started
        await futures[1]
        thread.close()
        return [first, time.monotonic() - started]

    first, second = asyncio.run(run())
    assert first < 0.25 <= second


def test_an_abandoned_node_thread_starts_nothing_more() -> None:
    """A call that never returns is given up: its future fails with the reason, the calls
    queued behind it (in its batch and in later ones) are handed back unstarted and never
    run, and so is any call submitted afterwards; only bounded calls are timed."""
    ran: list[int] = []
    gate = threading.Event()

    def call(n: int) -> int:
        ran.append(n)
        if n == 1:
            gate.wait()
        return n

    async def run() -> list[str]:
        thread = NodeThread("test")
        first = thread.submit_many(call, [(0,), (1,), (2,)], bounded=True)
        later = thread.submit_many(call, [(3,)])
        assert await first[0] == 0
        while thread.running_for()[0] == 0.0:
            await asyncio.sleep(0.01)
        assert thread.running_for()[1], "a bounded call is reported as bounded"
        thread.abandon(RuntimeError("hung"))
        after = thread.submit(call, 4)
        outcomes = []
        for future in [first[1], first[2], later[0], after]:
            try:
                await future
                outcomes.append("ran")
            except NotStarted:
                outcomes.append("not started")
            except RuntimeError as exc:
                outcomes.append(str(exc))
        gate.set()
        await asyncio.sleep(0.1)
        return outcomes

    outcomes = asyncio.run(run())
    assert outcomes == ["hung", "not started", "not started", "not started"]
    assert ran == [0, 1]


def test_window_holds_at_most_its_size_unless_empty() -> None:
    async def run() -> list[int]:
        window = Window(4)
        gate = asyncio.Event()
        seen: list[int] = []

        async def work() -> None:
            seen.append(window.used)
            await gate.wait()

        await window.spawn(work(), weight=3)
        waiting = asyncio.create_task(window.spawn(work(), weight=2))
        await asyncio.sleep(0.05)
        blocked = not waiting.done()
        gate.set()
        await waiting
        await window.spawn(work(), weight=9)  # more than the size goes alone
        await window.wait()
        return [int(blocked), *seen]

    assert asyncio.run(run()) == [1, 3, 2, 9]
