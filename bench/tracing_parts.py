"""What each part of a producer's tracing costs, timed alone in one process (issue 47).

The flow's ratio (``bench/tracing.py``) is a difference of two noisy CPU totals; this
times the parts that make it, in the process that pays them, with the SDK and the
OTLP/HTTP exporter vf uses and an endpoint that discards what it gets:

- ``unsampled_us``: ``OtlpTracer.emitted`` and ``end`` of an item the sampler drops;
- ``sampled_us``: the same for an item it records (the SDK's span, on the worker's thread);
- ``export_us_per_span``: encoding and posting a recorded span (the exporter's thread),
  batches of 512, the first batch (the connection, one-off imports) left out;
- ``at_1pct_us``: 0.99 of the first plus 0.01 of the other two;
- ``loop_us``: the same loop without the tracer (a ``range`` step and the item's name),
  what the two per-item figures hold that tracing off pays as well;
- ``full_collection_ms``: a full garbage collection with the worker and the SDK loaded,
  ``…_frozen_ms`` the same after ``gc.freeze()`` (what a started worker does, ADR 0242);
- ``header``: what the ``traceparent`` header adds to publishing an output, on a real
  nats-server: this process's CPU per 1 KiB message with a worker's headers and with them
  and a ``traceparent``, taking turns, through vf's path (``AckInbox`` writing protocol
  lines) and through nats-py's ``Client.publish`` (vf's fallback), and the header block
  alone (``header_block``, timed without the broker).

Medians of ``--reps`` repetitions, min-max beside them. Run it with either tree's
``runtime`` first on ``PYTHONPATH``; unless ``--no-save`` it fills the ``--record`` entry
of ``parts`` in ``bench/results/tracing.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import http.server
import json
import os
import statistics
import tempfile
import threading
import time
import timeit
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from publish_calls import DATA, WINDOW
from runtime import _Collector
from vf_runtime.broker import nats_internals
from vf_runtime.broker.jsacks import AckInbox
from vf_runtime.broker.protocol import header_block
from vf_runtime.local.infra import start_nats

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "tracing.json"
BATCH = 512


def _tracer(ratio: str) -> Any:
    os.environ["OTEL_TRACES_SAMPLER"] = "parentbased_traceidratio"
    os.environ["OTEL_TRACES_SAMPLER_ARG"] = ratio
    from vf_runtime.worker.otel import OtlpTracer

    config = types.SimpleNamespace(
        node_name="source", replica_id=0, flow_id="bench", run_id="r1", generation="g1"
    )
    return OtlpTracer(config, os.environ)  # type: ignore[arg-type]


def _per_item(tracer: Any, count: int, clock: Callable[[], float]) -> float:
    emitted = tracer.emitted
    started = clock()
    for n in range(count):
        emitted(item=f"source:{n}", seconds=1e-5).end("ok")
    return (clock() - started) / count * 1e6


def _loop(count: int, clock: Callable[[], float]) -> float:
    started = clock()
    for n in range(count):
        f"source:{n}"  # what _per_item makes for each item
    return (clock() - started) / count * 1e6


def _export(count: int) -> float:
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

    from vf_runtime.worker.otel import exporter

    kept: list[ReadableSpan] = []

    class Keep(SpanProcessor):
        def on_end(self, span: ReadableSpan) -> None:
            kept.append(span)

    tracer = _tracer("1.0")
    tracer.provider.add_span_processor(Keep())
    for n in range(count + BATCH):
        tracer.emitted(item=f"source:{n}", seconds=1e-5).end("ok")
    tracer.close(5.0)
    out = exporter(os.environ)
    out.export(kept[:BATCH])  # the connection and what the first export imports: once
    started = time.thread_time()
    for first in range(BATCH, len(kept), BATCH):
        out.export(kept[first : first + BATCH])
    return (time.thread_time() - started) / (len(kept) - BATCH) * 1e6


def _full_collection() -> tuple[float, float]:
    def median_ms() -> float:
        times = []
        for _ in range(15):
            started = time.process_time()
            gc.collect()
            times.append((time.process_time() - started) * 1e3)
        return statistics.median(times)

    import vf_runtime.worker.replica  # noqa: F401  (the worker's whole import graph)

    tracer = _tracer("0.01")
    loose = median_ms()
    gc.freeze()
    frozen = median_ms()
    gc.unfreeze()
    tracer.close(1.0)
    return loose, frozen


TRACEPARENT = {"traceparent": "00-" + "4bf92f3577b34da6" * 2 + "-00f067aa0ba902b7-02"}


async def _publish(url: str, count: int, traced: bool, label: str) -> float:
    """CPU µs per message to publish ``count`` outputs to a stream and read every ack."""
    import nats

    client = await nats.connect(url)
    inbox = AckInbox(client)
    await inbox.start()
    try:
        started = time.process_time()
        window: list[asyncio.Future[bool]] = []
        for n in range(count):
            headers = {"Nats-Msg-Id": f"{label}-{n:08x}", "VF-Env": "4", "VF-Life": "0a1b2c3d"}
            if traced:
                headers.update(TRACEPARENT)
            window.append((await inbox.publish("tp.out", DATA, headers=headers))[1])
            if len(window) >= WINDOW:
                await asyncio.gather(*window)
                window.clear()
        await asyncio.gather(*window)
        return (time.process_time() - started) / count * 1e6
    finally:
        await inbox.stop()
        await client.close()


async def _stream(url: str) -> None:
    import nats
    from nats.js.api import StorageType, StreamConfig

    client = await nats.connect(url)
    try:
        config = StreamConfig(name="tp", subjects=["tp.>"], storage=StorageType.FILE)
        await client.jetstream().add_stream(config)
    finally:
        await client.close()


def _header(count: int, reps: int) -> dict[str, Any]:
    """The publish CPU per message without and with a ``traceparent`` (both paths), and
    the header block's formatting alone."""
    runs: dict[str, list[float]] = {}
    plain = {"Nats-Msg-Id": "r0-00000000", "VF-Env": "4", "VF-Life": "0a1b2c3d"}
    for traced, headers in (("without", plain), ("with", {**plain, **TRACEPARENT})):
        times = timeit.repeat(functools.partial(header_block, headers), number=20_000, repeat=reps)
        runs[f"header_block_{traced}_us"] = [t / 20_000 * 1e6 for t in times]
    with tempfile.TemporaryDirectory(prefix="vf-tracing-parts-") as tmp:
        server = start_nats(Path(tmp) / "nats")
        try:
            asyncio.run(_stream(server.url))
            asyncio.run(_publish(server.url, 500, True, "warm"))
            for rep in range(reps):
                for path, lines in (("protocol_lines", True), ("client_publish", False)):
                    nats_internals.AVAILABLE = lines and not nats_internals.MISSING
                    for traced in ("without", "with"):
                        label = f"r{rep}{path}{traced}"
                        cpu = asyncio.run(_publish(server.url, count, traced == "with", label))
                        runs.setdefault(f"{path}_{traced}_us", []).append(cpu)
        finally:
            nats_internals.AVAILABLE = not nats_internals.MISSING
            server.stop()
    found = {
        k: {"median": statistics.median(v), "spread": [min(v), max(v)]} for k, v in runs.items()
    }
    return found


def measure(count: int, reps: int) -> dict[str, Any]:
    kinds = ("unsampled_us", "sampled_us", "export", "loop_us")
    runs: dict[str, list[float]] = {k: [] for k in kinds}
    os.environ["OTEL_BSP_MAX_QUEUE_SIZE"] = str(10 * count)  # no span dropped while timed
    dropped, recorded = _tracer("0.0"), _tracer("1.0")
    for _ in range(reps):
        runs["unsampled_us"].append(_per_item(dropped, count, time.thread_time))
        runs["loop_us"].append(_loop(count, time.thread_time))
        runs["sampled_us"].append(_per_item(recorded, count // 20, time.thread_time))
        runs["export"].append(_export(count // 20))
    dropped.close(1.0)
    recorded.close(1.0)
    found: dict[str, Any] = {
        "unsampled_us": statistics.median(runs["unsampled_us"]),
        "sampled_us": statistics.median(runs["sampled_us"]),
        "loop_us": statistics.median(runs["loop_us"]),
        "export_us_per_span": statistics.median(runs["export"]),
        "spread": {k: [min(v), max(v)] for k, v in runs.items()},
    }
    found["at_1pct_us"] = 0.99 * found["unsampled_us"] + 0.01 * (
        found["sampled_us"] + found["export_us_per_span"]
    )
    found["full_collection_ms"], found["full_collection_frozen_ms"] = _full_collection()
    found["header"] = _header(count // 10, reps)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--count", type=int, default=100_000, help="dropped items per rep")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--record", choices=("after", "before"), default="after")
    parser.add_argument("--no-save", action="store_true", help="print, write nothing")
    args = parser.parse_args()
    collector = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{collector.server_address[1]}"
    try:
        found = measure(args.count, args.reps)
    finally:
        collector.shutdown()
    print(json.dumps(found, indent=1))
    if not args.no_save:
        saved = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        saved.setdefault("parts", {}).setdefault(args.record, []).append(found)
        RESULTS.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
