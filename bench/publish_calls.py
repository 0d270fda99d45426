"""The client's CPU for each way a worker can publish, on a real nats-server, taking turns.

Three ways of sending a worker's outputs to a stream and reading the stream's acks: vf's
ack inbox (``vf_runtime.broker.jsacks``) writing protocol lines on the client's buffer
(``vf_runtime.broker.protocol``, the worker's path), the same inbox through
``Client.publish`` (``nats_internals.AVAILABLE`` False, the path taken when nats-py lacks a
member vf writes through), and nats-py's ``JetStreamContext.publish_async``. Each sends
``--count`` messages of 1 KiB with a worker's headers, at most ``WINDOW`` unacknowledged,
and waits for every ack. Then a worker's acks of its inputs: empty messages to 16 reply
subjects at a time, written as one batch of lines or as one ``Client.publish`` each.

The figure is this process's CPU (``time.process_time``) per message, the broker's not
counted; the ways take turns ``--reps`` rounds. Prints medians and spread (min-max) and,
unless ``--no-save``, writes them to ``bench/results/publish-calls.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client
from nats.js.api import StorageType, StreamConfig

from vf_runtime.broker import nats_internals
from vf_runtime.broker.jsacks import AckInbox
from vf_runtime.broker.protocol import publish_empty
from vf_runtime.local.infra import start_nats

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "publish-calls.json"
WINDOW = 256
DATA = b"x" * 1100  # a 1 KiB item in its envelope
ACKS = [f"$JS.ACK.vf-f-r-a.b--from--a.1.{n}.{n}.1700000000000000000.0" for n in range(16)]
Send = Callable[[str, bytes, dict[str, str]], Awaitable["asyncio.Future[Any]"]]


async def _outputs(client: Client, send: Send, count: int, label: str) -> float:
    """CPU µs per message to publish ``count`` messages and read every ack."""
    started = time.process_time()
    window: list[asyncio.Future[Any]] = []
    for n in range(count):
        headers = {"Nats-Msg-Id": f"{label}-{n:08x}", "VF-Env": "4", "VF-Life": "0123456789ab"}
        window.append(await send(f"pc.{label}", DATA, headers))
        if len(window) >= WINDOW:
            await asyncio.gather(*window)
            window.clear()
    await asyncio.gather(*window)
    return (time.process_time() - started) / count * 1e6


async def outputs(url: str, way: str, count: int, label: str) -> float:
    client = await nats.connect(url)
    try:
        if way == "publish_async":
            js = client.jetstream()

            async def send(subject: str, data: bytes, headers: dict[str, str]) -> Any:
                return await js.publish_async(subject, data, headers=headers)

            return await _outputs(client, send, count, label)
        inbox = AckInbox(client)
        await inbox.start()

        async def through_inbox(subject: str, data: bytes, headers: dict[str, str]) -> Any:
            return (await inbox.publish(subject, data, headers=headers))[1]

        nats_internals.AVAILABLE = way == "jsacks, protocol lines"
        try:
            return await _outputs(client, through_inbox, count, label)
        finally:
            nats_internals.AVAILABLE = not nats_internals.MISSING
            await inbox.stop()
    finally:
        await client.close()


async def input_acks(url: str, lines: bool, count: int) -> float:
    """CPU µs per ack of ``count`` acks sent in batches of 16 (the broker ignores them)."""
    client = await nats.connect(url)
    nats_internals.AVAILABLE = lines
    try:
        started = time.process_time()
        for _ in range(count // len(ACKS)):
            await publish_empty(client, ACKS)
        await client.flush()
        return (time.process_time() - started) / count * 1e6
    finally:
        nats_internals.AVAILABLE = not nats_internals.MISSING
        await client.close()


async def _stream(url: str) -> None:
    client = await nats.connect(url)
    try:
        config = StreamConfig(name="pc", subjects=["pc.>"], storage=StorageType.FILE)
        await client.jetstream().add_stream(config)
    finally:
        await client.close()


def measure(count: int, reps: int) -> dict[str, Any]:
    ways = ("jsacks, protocol lines", "jsacks, Client.publish", "publish_async")
    found: dict[str, list[float]] = {w: [] for w in ways}
    acks: dict[str, list[float]] = {"protocol lines": [], "Client.publish": []}
    with tempfile.TemporaryDirectory(prefix="vf-publish-calls-") as tmp:
        server = start_nats(Path(tmp) / "nats")
        try:
            asyncio.run(_stream(server.url))
            asyncio.run(outputs(server.url, ways[0], 500, "warm"))
            for rep in range(reps):
                for i, way in enumerate(ways):
                    found[way].append(asyncio.run(outputs(server.url, way, count, f"r{rep}w{i}")))
                for key, runs in acks.items():
                    lines = key == "protocol lines"
                    runs.append(asyncio.run(input_acks(server.url, lines, count)))
        finally:
            server.stop()
    return {
        "count": count,
        "reps": reps,
        "window": WINDOW,
        "machine": f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}",
        "output_cpu_us_per_msg": found,
        "input_ack_cpu_us_per_ack": acks,
    }


def table(report: dict[str, Any]) -> str:
    lines = ["| what the client sends | CPU µs per message, median (min-max) |", "|---|---:|"]
    for part, unit in (("output_cpu_us_per_msg", "output"), ("input_ack_cpu_us_per_ack", "ack")):
        for way, runs in report[part].items():
            spread = f"{statistics.median(runs):.1f} ({min(runs):.1f}-{max(runs):.1f})"
            lines.append(f"| {unit}: {way} | {spread} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=20000, help="messages per way and round")
    parser.add_argument("--reps", type=int, default=5, help="rounds, every way once each")
    parser.add_argument("--no-save", action="store_true", help="only print the table")
    args = parser.parse_args()
    report = measure(args.count, args.reps)
    print(table(report))
    if not args.no_save:
        RESULTS.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
