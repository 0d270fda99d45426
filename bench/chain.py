"""Raw nats-py baselines: a single-process loop, and a chain with the processes and hops
of a vf producer → processor → consumer.

The single-process loop (:func:`raw_nats`) publishes and fetches in one process, one hop.

Three processes: a publisher puts ``count`` messages on stream A; a relay fetches them in
batches of 64, republishes each on stream B and acks the batch once the republishes are
confirmed (as vf acks only after the output is published); a reader fetches from B and
acks. Both streams have vf's BATCH settings and every publish carries a ``Nats-Msg-Id``.
Each process reports when it began and ended its loop and the CPU it spent in it.

Run as a script it is one of the three roles; :func:`raw_chain` runs the whole chain.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import nats
import nats.errors
from nats.js.api import DiscardPolicy, RetentionPolicy, StreamConfig

from vf_runtime.broker.topology import DUPLICATE_WINDOW
from vf_runtime.constants import BATCH_MAX_MSGS
from vf_runtime.wire import DATA, Envelope, decode_envelope, decode_payload, encode_envelope
from vf_runtime.wire import encode_payload as encode

FETCH_BATCH = 64  # what vf's readers fetch at most; the raw readers get the same


async def _streams(url: str, name: str) -> None:
    client = await nats.connect(url)
    js = client.jetstream()
    for stream in ("a", "b"):
        await js.add_stream(
            StreamConfig(
                name=f"{name}{stream}",
                subjects=[f"{name}.{stream}"],
                retention=RetentionPolicy.INTEREST,
                max_msgs=BATCH_MAX_MSGS,
                discard=DiscardPolicy.NEW,
                duplicate_window=DUPLICATE_WINDOW,
            )
        )
    await js.pull_subscribe(f"{name}.a", durable="relay", stream=f"{name}a")
    await js.pull_subscribe(f"{name}.b", durable="reader", stream=f"{name}b")
    await client.close()


async def _drop(url: str, name: str) -> None:
    client = await nats.connect(url)
    js = client.jetstream()
    for stream in ("a", "b"):
        await js.delete_stream(f"{name}{stream}")
    await client.close()


async def _publisher(js: Any, name: str, count: int, size: int) -> None:
    payload = b"x" * size
    for i in range(count):
        await js.publish_async(f"{name}.a", payload, headers={"Nats-Msg-Id": f"a{i}"})
    await js.publish_async_completed()


async def _fetch(sub: Any) -> list[Any]:
    try:
        batch: list[Any] = await sub.fetch(batch=FETCH_BATCH, timeout=1.0)
    except (TimeoutError, nats.errors.TimeoutError):
        return []
    return batch


async def _relay(js: Any, name: str, count: int) -> None:
    sub = await js.pull_subscribe(f"{name}.a", durable="relay", stream=f"{name}a")
    seen = 0
    while seen < count:
        batch = await _fetch(sub)
        acks = [
            await js.publish_async(f"{name}.b", msg.data, headers={"Nats-Msg-Id": f"b{seen + k}"})
            for k, msg in enumerate(batch)
        ]
        await asyncio.gather(*acks)
        for msg in batch:
            await msg.ack()
        seen += len(batch)


async def _reader(js: Any, name: str, count: int) -> None:
    sub = await js.pull_subscribe(f"{name}.b", durable="reader", stream=f"{name}b")
    seen = 0
    while seen < count:
        batch = await _fetch(sub)
        for msg in batch:
            await msg.ack()
        seen += len(batch)


async def _role(role: str, url: str, name: str, count: int, size: int) -> dict[str, float]:
    client = await nats.connect(url)
    js = client.jetstream()
    began, cpu = time.time(), time.process_time()
    if role == "publisher":
        await _publisher(js, name, count, size)
    elif role == "relay":
        await _relay(js, name, count)
    else:
        await _reader(js, name, count)
    ended, cpu = time.time(), time.process_time() - cpu
    await client.flush()
    await client.close()
    return {"began": began, "ended": ended, "cpu_s": cpu}


def _v4_message(i: int, *, size: int) -> tuple[bytes, str]:
    """The v4 envelope of a 1 KiB-like item as a vf worker sends it, and its message id."""
    ptype, body = encode({"i": i, "t0": time.time(), "pad": b"x" * size})
    envelope = Envelope(
        type=DATA,
        producer="raw",
        flow_id="raw",
        run_id="r0",
        trace_id=f"t{i}",
        seq=i,
        event_ts=time.time(),
        span_id=f"s{i}",
        payload_type=ptype,
        payload=body,
    )
    return encode_envelope(envelope), envelope.message_id


async def raw_nats(
    url: str, *, count: int, size: int, pipelined: bool, envelope: bool = False
) -> dict[str, float]:
    """One nats-py process: a publisher task and a fetch-and-ack task on one stream with
    vf's BATCH settings, a ``Nats-Msg-Id`` on each publish, fetches as large as vf's
    largest prefetch. ``pipelined`` uses ``publish_async`` instead of awaiting each ack.
    ``envelope``: each item is encoded into vf's v4 envelope by vf's own codec before its
    publish and decoded (envelope and payload) after its fetch, as a vf hop does.
    """
    client = await nats.connect(url)
    js = client.jetstream()
    name = f"raw{time.monotonic_ns()}"
    await js.add_stream(
        StreamConfig(
            name=name,
            subjects=[f"{name}.data"],
            retention=RetentionPolicy.INTEREST,
            max_msgs=BATCH_MAX_MSGS,
            discard=DiscardPolicy.NEW,
            duplicate_window=DUPLICATE_WINDOW,
        )
    )
    sub = await js.pull_subscribe(f"{name}.data", durable="reader", stream=name)
    payload = b"x" * size
    cpu, started = time.process_time(), time.perf_counter()

    async def publish() -> None:
        for i in range(count):
            data, msg_id = _v4_message(i, size=size) if envelope else (payload, f"m{i}")
            headers = {"Nats-Msg-Id": msg_id}
            if pipelined:
                await js.publish_async(f"{name}.data", data, headers=headers)
            else:
                await js.publish(f"{name}.data", data, headers=headers)
        await js.publish_async_completed()

    async def consume() -> None:
        seen = 0
        while seen < count:
            try:
                batch = await sub.fetch(batch=FETCH_BATCH, timeout=1.0)
            except (TimeoutError, nats.errors.TimeoutError):
                continue
            for msg in batch:
                if envelope:
                    got = decode_envelope(msg.data)
                    decode_payload(got.payload_type, got.payload)
                await msg.ack()
            seen += len(batch)

    await asyncio.gather(publish(), consume())
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    await js.delete_stream(name)
    await client.close()
    return {"msgs_s": count / elapsed, "cpu_us_per_msg": cpu / count * 1e6}


def raw_chain(url: str, *, count: int, size: int) -> dict[str, Any]:
    """Run the three processes; items/s from the first publish to the last read, and the
    CPU per message each process spent in its loop."""
    name = f"chain{time.monotonic_ns()}"
    asyncio.run(_streams(url, name))
    procs = {
        role: subprocess.Popen(
            [sys.executable, __file__, role, url, name, str(count), str(size)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for role in ("reader", "relay", "publisher")
    }
    found = {}
    for role, proc in procs.items():
        out, _ = proc.communicate(timeout=300)
        if proc.returncode != 0:
            raise SystemExit(f"raw chain {role} exited {proc.returncode}")
        found[role] = json.loads(out.splitlines()[-1])
    asyncio.run(_drop(url, name))
    elapsed = found["reader"]["ended"] - found["publisher"]["began"]
    return {
        "msgs_s": count / elapsed,
        "cpu_us_per_msg": {role: r["cpu_s"] / count * 1e6 for role, r in found.items()},
    }


if __name__ == "__main__":
    role, url, name, count, size = sys.argv[1:6]
    result = asyncio.run(_role(role, url, name, int(count), int(size)))
    print(json.dumps(result))
