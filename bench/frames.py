"""1080p ``bgr8`` frames: a vf flow against a raw Redis + NATS loop, and copies in the codec.

*Copies.* A child process fixes glibc's mmap threshold at 128 KiB, so that every buffer
the size of a frame is fresh memory that faults in page by page when written. The minor
page faults of one step, divided by those of one plain ``bytes()`` copy of the frame, are
the number of frame-sized buffers that step wrote: protobuf's and numpy's copies count
as much as Python's.

*Throughput.* The vf flow is producer → identity processor → consumer over the payload
store (each hop stores the frame in Redis and sends a pointer). The raw loop does what
that costs at the least in one process per stage: the producer ``SET``s the bytes and
publishes the key; the relay ``GET``s them, ``SET``s them under a new key and publishes
that; the reader ``GET``s them.
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
import redis.asyncio
from nats.js.api import DiscardPolicy, RetentionPolicy, StreamConfig

from vf_runtime.broker.topology import DUPLICATE_WINDOW
from vf_runtime.constants import BATCH_MAX_MSGS

SHAPE = (1080, 1920, 3)  # 1080p bgr8: 6,220,800 bytes

COPIES_CHILD = r"""
import ctypes, json, resource
libc = ctypes.CDLL("libc.so.6")
libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD: big buffers are fresh mmaps
import numpy
from vf_runtime.wire import decode_payload, encode_payload

frame = numpy.random.default_rng(0).integers(0, 255, size=%r, dtype=numpy.uint8)

def faults(step):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    kept = step()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    del kept
    return after - before

for _ in range(2):  # warm: imports, caches
    kind, data = encode_payload(frame)
    decode_payload(kind, data, arrays=True)
one = min(faults(lambda: bytes(memoryview(frame))) for _ in range(3))
encode = min(faults(lambda: encode_payload(frame)) for _ in range(3))
decode = min(faults(lambda: decode_payload(kind, data, arrays=True)) for _ in range(3))
print(json.dumps({"one_copy_faults": one, "encode": encode / one, "decode": decode / one}))
"""


def codec_copies() -> dict[str, float]:
    """Frame-sized buffers written by encoding a frame and by decoding it (see above)."""
    done = subprocess.run(
        [sys.executable, "-c", COPIES_CHILD % (SHAPE,)], check=False, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"codec copy count failed:\n{done.stderr}")
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


async def _streams(js: Any, name: str) -> None:
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


async def _next(sub: Any) -> Any:
    while True:
        try:
            return (await sub.fetch(batch=1, timeout=1.0))[0]
        except (TimeoutError, nats.errors.TimeoutError):
            continue


async def _producer(js: Any, store: Any, name: str, count: int) -> None:
    frame = bytes(SHAPE[0] * SHAPE[1] * SHAPE[2])
    for i in range(count):
        await store.set(f"{name}:a:{i}", frame, ex=600)
        body = json.dumps([i, time.time()]).encode()
        await js.publish(f"{name}.a", body, headers={"Nats-Msg-Id": f"a{i}"})


async def _relay(js: Any, store: Any, name: str, count: int) -> None:
    sub = await js.pull_subscribe(f"{name}.a", durable="relay", stream=f"{name}a")
    for _ in range(count):
        msg = await _next(sub)
        i, _ = json.loads(msg.data)
        frame = await store.get(f"{name}:a:{i}")
        await store.set(f"{name}:b:{i}", frame, ex=600)
        await js.publish(f"{name}.b", msg.data, headers={"Nats-Msg-Id": f"b{i}"})
        await msg.ack()
        await store.delete(f"{name}:a:{i}")


async def _reader(js: Any, store: Any, name: str, count: int) -> list[list[float]]:
    sub = await js.pull_subscribe(f"{name}.b", durable="reader", stream=f"{name}b")
    records = []
    for _ in range(count):
        msg = await _next(sub)
        i, t0 = json.loads(msg.data)
        frame = await store.get(f"{name}:b:{i}")
        assert len(frame) == SHAPE[0] * SHAPE[1] * SHAPE[2]
        await msg.ack()
        await store.delete(f"{name}:b:{i}")
        records.append([i, t0, time.time()])
    return records


async def _role(role: str, nats_url: str, redis_url: str, name: str, count: int) -> Any:
    client = await nats.connect(nats_url)
    js = client.jetstream()
    store = redis.asyncio.Redis.from_url(redis_url)
    if role == "setup":
        await _streams(js, name)
        await js.pull_subscribe(f"{name}.a", durable="relay", stream=f"{name}a")
        await js.pull_subscribe(f"{name}.b", durable="reader", stream=f"{name}b")
        result: Any = None
    elif role == "producer":
        result = await _producer(js, store, name, count)
    elif role == "relay":
        result = await _relay(js, store, name, count)
    else:
        result = await _reader(js, store, name, count)
    await store.aclose()
    await client.close()
    return result


def raw_frames(nats_url: str, redis_url: str, *, count: int) -> list[list[float]]:
    """The raw three-process frame loop; the reader's records ``[i, produced, read]``."""
    name = f"frames{time.monotonic_ns()}"
    asyncio.run(_role("setup", nats_url, redis_url, name, count))
    argv = [sys.executable, __file__, nats_url, redis_url, name, str(count)]
    procs = {
        role: subprocess.Popen([*argv, role], stdout=subprocess.PIPE, text=True)
        for role in ("reader", "relay", "producer")
    }
    outputs = {role: proc.communicate(timeout=600)[0] for role, proc in procs.items()}
    if any(proc.returncode for proc in procs.values()):
        raise SystemExit("the raw frame loop failed")
    records: list[list[float]] = json.loads(outputs["reader"].splitlines()[-1])
    return records


if __name__ == "__main__":
    nats_url, redis_url, name, count, role = sys.argv[1:6]
    print(json.dumps(asyncio.run(_role(role, nats_url, redis_url, name, int(count)))))
