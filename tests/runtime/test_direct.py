"""Direct delivery hands a worker's hot subscriptions the messages nats-py would have handed
them: the same subjects, replies, data and headers, status messages included, on a real
nats-server."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import nats
import pytest
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, StreamConfig

from vf_runtime.broker.client import connect
from vf_runtime.broker.direct import DirectClient, subscribe_direct, unsubscribe_direct
from vf_runtime.broker.pull import PullFeed
from vf_runtime.local.infra import LocalServer

# Header blocks as a publisher may write them, odd ones included (HPUB takes them raw).
BLOCKS = [
    b"NATS/1.0\r\nNats-Msg-Id: 0123abcd\r\nVF-Env: 4\r\nVF-Life: 17\r\n\r\n",
    b"NATS/1.0\r\nA:b\r\n B :  c d \r\nno colon here\r\nx y: z\r\n"
    b"\xffn: v\r\nu: \xc3\xa9\xff\r\n\r\n",
    b"NATS/1.0\r\nEmpty:\r\nRepeated: 1\r\nRepeated: 2\r\n\r\n",
    b"NATS/1.0\r\n\r\n",
]


def _seen(msg: Msg) -> tuple[str, str, bytes, Any]:
    return msg.subject, msg.reply, msg.data, msg.headers


def test_direct_and_queued_subscribers_receive_the_same_messages(
    nats_server: LocalServer,
) -> None:
    direct, queued = asyncio.run(_both_ways(nats_server.url))
    assert len(direct) == len(BLOCKS) + 2
    assert direct == queued


async def _both_ways(url: str) -> tuple[list[Any], list[Any]]:
    fast = await connect(url, timeout=10.0, name="direct-test")
    plain = await nats.connect(url)
    assert isinstance(fast, DirectClient)
    direct: list[Any] = []
    queued: list[Any] = []

    async def keep(msg: Msg) -> None:
        queued.append(_seen(msg))

    sub = await subscribe_direct(fast, "direct.test", lambda msg: direct.append(_seen(msg)))
    await plain.subscribe("direct.test", cb=keep)
    await fast.flush()
    await plain.flush()
    for n, block in enumerate(BLOCKS):
        body = f"payload {n}".encode()
        line = f"HPUB direct.test reply.{n} {len(block)} {len(block) + len(body)}\r\n"
        await plain._send_command(line.encode() + block + body + b"\r\n")
    await plain.publish("direct.test", b"no headers")
    await plain.publish("direct.test", b"", headers={"K": "v"})
    await plain.flush()
    await _until(lambda: len(queued) == len(direct) == len(BLOCKS) + 2)
    await unsubscribe_direct(fast, sub)
    await plain.publish("direct.test", b"after")
    await plain.flush()
    await _until(lambda: len(queued) == len(BLOCKS) + 3)
    await fast.close()
    await plain.close()
    return direct, queued[:-1]


def test_status_messages_from_jetstream_read_alike(nats_server: LocalServer) -> None:
    direct, queued = asyncio.run(_pull_statuses(nats_server.url))
    assert [h.get("Status") for h in direct] == ["404", "408"]
    assert direct == queued


async def _pull_statuses(url: str) -> tuple[list[Any], list[Any]]:
    """An empty durable answers a no-wait pull with 404 and an expired pull with 408."""
    fast = await connect(url, timeout=10.0, name="direct-status")
    plain = await nats.connect(url)
    js = plain.jetstream()
    await js.add_stream(StreamConfig(name="directstatus", subjects=["directstatus.x"]))
    await js.pull_subscribe("directstatus.x", durable="d", stream="directstatus")
    direct: list[dict[str, str]] = []
    queued: list[dict[str, str]] = []

    async def keep(msg: Msg) -> None:
        queued.append(dict(msg.headers or {}))

    sub = await subscribe_direct(fast, "status.a", lambda m: direct.append(dict(m.headers or {})))
    await plain.subscribe("status.b", cb=keep)
    for n, body in enumerate((b'{"batch":1,"no_wait":true}', b'{"batch":1,"expires":50000000}')):
        for client, inbox in ((fast, "status.a"), (plain, "status.b")):
            await client.publish("$JS.API.CONSUMER.MSG.NEXT.directstatus.d", body, reply=inbox)
        await _until(lambda n=n: len(direct) == len(queued) == n + 1)
    await unsubscribe_direct(fast, sub)
    await js.delete_stream("directstatus")
    await fast.close()
    await plain.close()
    return direct, queued


def test_a_handler_that_raises_does_not_close_the_connection(nats_server: LocalServer) -> None:
    async def run() -> list[bytes]:
        fast = await connect(nats_server.url, timeout=10.0, name="direct-raise")
        got: list[bytes] = []

        def handle(msg: Msg) -> None:
            if msg.data == b"bad":
                raise ValueError("a bug in a handler")
            got.append(msg.data)

        await subscribe_direct(fast, "direct.raise", handle)
        for data in (b"one", b"bad", b"two"):
            await fast.publish("direct.raise", data)
        await _until(lambda: len(got) == 2)
        assert fast.is_connected
        await fast.close()
        return got

    assert asyncio.run(run()) == [b"one", b"two"]


def test_other_clients_get_a_callback_subscription(nats_server: LocalServer) -> None:
    async def run() -> list[bytes]:
        plain = await nats.connect(nats_server.url)
        got: list[bytes] = []
        sub = await subscribe_direct(plain, "direct.plain", lambda m: got.append(m.data))
        await plain.publish("direct.plain", b"x")
        await _until(lambda: got == [b"x"])
        await unsubscribe_direct(plain, sub)
        await plain.close()
        return got

    assert asyncio.run(run()) == [b"x"]


async def _until(done: Any, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not done():
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail("messages did not arrive within 10 s")
        await asyncio.sleep(0.01)


def test_a_subscription_nats_py_ended_hands_nothing_more(nats_server: LocalServer) -> None:
    """Unsubscribed through nats-py itself (not ``unsubscribe_direct``): a message that was
    already on its way when it ended is dropped as nats-py drops it."""

    async def run() -> list[bytes]:
        fast = await connect(nats_server.url, timeout=10.0, name="direct-ended")
        got: list[bytes] = []
        sub = await subscribe_direct(fast, "direct.ended", lambda m: got.append(m.data))
        await fast.publish("direct.ended", b"before")
        await _until(lambda: got == [b"before"])
        await sub.unsubscribe()
        # what the read loop does with a message for that subscription still in flight
        await fast._process_msg(sub._id, b"direct.ended", b"", b"late", None)
        await fast.close()
        return got

    assert asyncio.run(run()) == [b"before"]


def test_a_stopped_pull_feed_leaves_nothing_to_wait_out(nats_server: LocalServer) -> None:
    """A feed stopped while the broker is still pushing a large request: what reached the
    feed's owner is handed back (nak), and what the broker sent after the end it keeps for
    the next reader. Nothing stays leased to an inbox nobody reads until the ack wait (60
    s here) runs out: a second feed gets every message at once."""
    before, received, again = asyncio.run(_stop_mid_delivery(nats_server.url, count=3000))
    assert again == 3000, f"{3000 - again} message(s) wait out the ack wait"
    assert before < received, "the stop did not fall while messages were on their way"


async def _stop_mid_delivery(url: str, *, count: int) -> tuple[int, int, int]:
    client = await connect(url, timeout=10.0, name="pull-stop")
    js = client.jetstream()
    stream = f"pullstop{time.monotonic_ns()}"
    await js.add_stream(StreamConfig(name=stream, subjects=[f"{stream}.data"]))
    await js.add_consumer(
        stream, ConsumerConfig(durable_name="reader", ack_wait=60, max_ack_pending=count)
    )
    for n in range(count):
        await js.publish_async(f"{stream}.data", b"%d" % n + b"x" * 512)
    await js.publish_async_completed()
    first, before = await _feed_until_stopped(client, stream, count=count, stop_after=1)
    for msg in first:
        await msg.nak()
    second, _ = await _feed_until_stopped(client, stream, count=count, stop_after=count)
    await js.delete_stream(stream)
    await client.close()
    return before, len(first), len(second)


async def _feed_until_stopped(
    client: Any, stream: str, *, count: int, stop_after: int
) -> tuple[list[Msg], int]:
    """A feed asking for ``count``, stopped once ``stop_after`` arrived (or 5 s passed): what
    it received, and how much of that had arrived when the stop began."""
    received: list[Msg] = []
    enough = asyncio.Event()

    def deliver(msg: Msg) -> None:
        received.append(msg)
        if len(received) >= stop_after:
            enough.set()

    feed = PullFeed(client, stream=stream, durable="reader", deliver=deliver, changed=lambda: None)
    await feed.start()
    await feed.request(count)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(enough.wait(), 5)
    before = len(received)
    await feed.stop()
    return received, before
