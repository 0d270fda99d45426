"""Benchmark vf's worker runtime against raw nats-py and raw Redis on one local server pair.

In one run: 1 KiB messages through raw nats-py loops and a vf producer → processor →
consumer flow; per-hop latency of an identity chain; 1 MiB payloads through vf's blob
path and raw Redis SET+GET; one stage at 1, 2 and 4 replicas. Writes
``bench/results/runtime.json`` and the runtime table in ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import io
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import nats
import nats.errors
import redis
from nats.js.api import DiscardPolicy, RetentionPolicy, StreamConfig

from vf.commands.run_local.command import RunLocalRequest, run_local
from vf_runtime.broker.topology import BATCH_MAX_MSGS, DUPLICATE_WINDOW
from vf_runtime.local.infra import LocalServer, start_nats, start_redis
from vf_runtime.store.blobstore import BlobStore
from vf_runtime.wire import (
    DATA,
    BlobRef,
    Envelope,
    decode_envelope,
    decode_payload,
    encode_envelope,
)
from vf_runtime.wire import encode_payload as encode

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "runtime.json"
DOC = ROOT / "docs" / "performance.md"
START, END = "<!-- runtime-table:start -->", "<!-- runtime-table:end -->"
SUMMARY = re.compile(r"\[(\S+)/r\d+\] .* summary: .*cpu_seconds=([\d.]+)")
Servers = tuple[LocalServer, LocalServer]
SPIN_ROUNDS = 360_000  # the CPU-bound stage's loop: about 20 ms of one core here
RAW_FETCH_BATCH = 64  # what vf's readers fetch at most; the raw reader gets the same
# videoflow's published figures (32-thread machine; E2, E3), shown beside ours.
VIDEOFLOW: dict[str, Any] = {
    "per_hop_ms": 1.9,
    "median_ms_by_depth": {"1": 4.22, "2": 6.40, "4": 10.31, "8": 17.80},
    "scaling_sleep_msgs_s": {"1": 44.0, "2": 87.2, "4": 172.7},
}

NODES = """
import json, os, time
from vf import Consumer, Processor, Producer

class Source(Producer):
    def __init__(self, count=100, size=1024, rate=0.0, **kw):
        super().__init__(**kw)
        self.count, self.size, self.rate, self.n = count, size, rate, 0
        self.next_at = None
    def next(self):
        if self.n >= self.count:
            raise StopIteration
        if self.rate:
            now = time.monotonic()
            self.next_at = self.next_at or now
            if self.next_at > now:
                time.sleep(self.next_at - now)
            self.next_at += 1.0 / self.rate
        self.n += 1
        return {"i": self.n, "t0": time.time(), "pad": b"x" * self.size}

class Identity(Processor):
    def process(self, item):
        return item

def spin(rounds):
    total = 0
    for i in range(rounds):
        total += i * i
    return total

class Work(Processor):
    def __init__(self, ms=20.0, rounds=0, **kw):
        super().__init__(**kw)
        self.ms, self.rounds = ms, rounds
    def process(self, item):
        if self.rounds:  # a fixed amount of computation, whoever else wants the CPU
            spin(self.rounds)
        else:
            time.sleep(self.ms / 1000)
        return item

class Sink(Consumer):
    def __init__(self, path="", **kw):
        super().__init__(**kw)
        self.out = open(path, "a", buffering=1)
    def consume(self, item):
        self.out.write(json.dumps([item["i"], item["t0"], time.time()]) + "\\n")
"""

GRAPH = """
import os
from bench_nodes import Identity, Sink, Source, Work
from vf import BATCH, Flow

def build_flow():
    node = Source(count=int(os.environ["B_COUNT"]), size=int(os.environ["B_SIZE"]),
                  rate=float(os.environ["B_RATE"]), name="source")
    for depth in range(int(os.environ["B_DEPTH"])):
        node = Identity(name=f"hop{depth}")(node)
    if os.environ["B_WORK"]:
        node = Work(ms=float(os.environ["B_WORK_MS"]), rounds=int(os.environ["B_WORK_ROUNDS"]),
                    nb_tasks=int(os.environ["B_REPLICAS"]), name="work")(node)
    sink = Sink(path=os.environ["B_OUT"], name="sink")(node)
    return Flow([sink], flow_type=BATCH, flow_id=os.environ["B_FLOW"])
"""


async def raw_nats(url: str, *, count: int, size: int, pipelined: bool) -> dict[str, float]:
    """One nats-py process: a publisher task and a fetch-and-ack task on one stream with
    vf's BATCH settings, a ``Nats-Msg-Id`` on each publish, fetches as large as vf's
    largest prefetch. ``pipelined`` uses ``publish_async`` instead of awaiting each ack.
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
            headers = {"Nats-Msg-Id": f"m{i}"}
            if pipelined:
                await js.publish_async(f"{name}.data", payload, headers=headers)
            else:
                await js.publish(f"{name}.data", payload, headers=headers)
        await js.publish_async_completed()

    async def consume() -> None:
        seen = 0
        while seen < count:
            try:
                batch = await sub.fetch(batch=RAW_FETCH_BATCH, timeout=1.0)
            except (TimeoutError, nats.errors.TimeoutError):
                continue
            for msg in batch:
                await msg.ack()
            seen += len(batch)

    await asyncio.gather(publish(), consume())
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    await js.delete_stream(name)
    await client.close()
    return {"msgs_s": count / elapsed, "cpu_us_per_msg": cpu / count * 1e6}


def vf_flow(servers: Servers, *, work: Path, **params: Any) -> dict[str, Any]:
    """Run the bench graph through ``vf run-local``: the sink's records and each stage's CPU."""
    out = work / f"{params['flow']}.jsonl"
    os.environ.update(
        B_COUNT=str(params["count"]),
        B_SIZE=str(params.get("size", 1024)),
        B_RATE=str(params.get("rate", 0.0)),
        B_DEPTH=str(params.get("depth", 0)),
        B_WORK=params.get("kind", ""),
        B_WORK_ROUNDS=str(params.get("rounds", 0)),
        B_WORK_MS=str(params.get("work_ms", 0)),
        B_REPLICAS=str(params.get("replicas", 1)),
        B_OUT=str(out),
        B_FLOW=params["flow"],
    )
    log = io.StringIO()
    request = RunLocalRequest(
        graph=str(work / "graph.py"),
        nats_url=servers[0].url,
        redis_url=servers[1].url,
        stall_seconds=60,
        output=log,
    )
    code = run_local(request)
    if code != 0:
        raise SystemExit(f"bench flow {params['flow']} failed with exit {code}:\n{log.getvalue()}")
    cpu: dict[str, float] = {}
    for node, seconds in SUMMARY.findall(log.getvalue()):
        cpu[node] = cpu.get(node, 0.0) + float(seconds)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    if len(records) != params["count"]:
        raise SystemExit(f"bench flow {params['flow']} delivered {len(records)} records")
    return {"records": records, "cpu": cpu}


def rate(records: list[list[float]]) -> float:
    """Items per second from the first item produced to the last one consumed."""
    return len(records) / (max(r[2] for r in records) - min(r[1] for r in records))


def throughput(servers: Servers, *, work: Path, count: int, reps: int) -> dict[str, Any]:
    """Raw loops and the vf flow, interleaved rep by rep; medians and per-rep ratios."""
    runs: list[dict[str, Any]] = []
    for rep in range(reps):
        awaited = asyncio.run(raw_nats(servers[0].url, count=count, size=1024, pipelined=False))
        pipelined = asyncio.run(raw_nats(servers[0].url, count=count, size=1024, pipelined=True))
        flow = vf_flow(servers, work=work, flow=f"tput{rep}", count=count, depth=1)
        vf = rate(flow["records"])
        runs.append(
            {
                "raw_awaited_msgs_s": awaited["msgs_s"],
                "raw_pipelined_msgs_s": pipelined["msgs_s"],
                "raw_cpu_us_per_msg": pipelined["cpu_us_per_msg"],
                "vf_msgs_s": vf,
                "vf_cpu_us_per_msg": {k: v / count * 1e6 for k, v in flow["cpu"].items()},
                "ratio_vs_pipelined": vf / pipelined["msgs_s"],
                "ratio_vs_awaited": vf / awaited["msgs_s"],
            }
        )
    keys = ["raw_awaited_msgs_s", "raw_pipelined_msgs_s", "raw_cpu_us_per_msg", "vf_msgs_s"]
    keys += ["ratio_vs_pipelined", "ratio_vs_awaited"]
    medians = {k: statistics.median(r[k] for r in runs) for k in keys}
    stages = runs[0]["vf_cpu_us_per_msg"]
    medians["vf_cpu_us_per_msg"] = {
        s: statistics.median(r["vf_cpu_us_per_msg"][s] for r in runs) for s in stages
    }
    return {"count": count, "reps": reps, "median": medians, "runs": runs}


def hop_latency(servers: Servers, *, work: Path, depths: list[int], count: int) -> dict[str, Any]:
    """Median end-to-end latency of a paced identity chain per depth, and the slope per hop."""
    medians: dict[str, float] = {}  # keyed as JSON keys them
    p95: dict[str, float] = {}
    for depth in depths:
        flow = vf_flow(
            servers, work=work, flow=f"chain{depth}", count=count, rate=50.0, depth=depth
        )
        latencies = sorted((r[2] - r[1]) * 1000 for r in flow["records"])
        medians[str(depth)] = statistics.median(latencies)
        p95[str(depth)] = latencies[int(0.95 * (len(latencies) - 1))]
    slope = statistics.linear_regression(depths, list(medians.values())).slope
    return {"median_ms_by_depth": medians, "p95_ms_by_depth": p95, "per_hop_ms": slope}


async def _vf_blobs(store: BlobStore, value: dict[str, bytes], *, first: int, count: int) -> None:
    """``count`` payloads through vf's offload path: encode, store with the reader
    obligation, envelope out and in, fetch, decode; each release runs in the
    background while the next payload goes, as in a worker."""
    releases: list[asyncio.Task[bool]] = []
    for i in range(first, first + count):
        payload_type, data = encode(value)
        ref = await store.put(f"bench{i}", data, readers=["reader"])
        pointer_type, pointer = encode(
            BlobRef(ref=ref, inner_payload_type=payload_type, size=len(data))
        )
        envelope = Envelope(type=DATA, producer="p", flow_id="b", run_id="r", trace_id="", seq=i)
        envelope = dataclasses.replace(envelope, payload_type=pointer_type, payload=pointer)
        received = decode_envelope(encode_envelope(envelope))
        ref_back = decode_payload(received.payload_type, received.payload)
        decode_payload(ref_back.inner_payload_type, await store.get(ref_back.ref))
        releases.append(asyncio.create_task(store.release(ref_back.ref, reader="reader")))
    await asyncio.gather(*releases)


async def blob_path(url: str, *, size: int, reps: int) -> dict[str, float]:
    """MiB/s for payloads of ``size`` bytes: vf's offload path vs raw SET+GET, same server.

    vf's path is what an offloaded payload costs a publisher and a reader (see
    ``_vf_blobs``); the raw path is one SET and one GET of the same bytes. Blocks of
    ten alternate, so both see the same server state (append-only file, memory).
    """
    store = BlobStore.from_url(url, ttl_seconds=600)
    raw = redis.asyncio.Redis.from_url(url)
    value = {"frame": b"\x7f" * size}
    vf_seconds = raw_seconds = 0.0
    for block in range(0, reps, 10):
        started = time.perf_counter()
        await _vf_blobs(store, value, first=block, count=10)
        vf_seconds += time.perf_counter() - started
        started = time.perf_counter()
        for i in range(block, block + 10):
            await raw.set(f"raw{i}", value["frame"], ex=600)
            await raw.get(f"raw{i}")
        raw_seconds += time.perf_counter() - started
        await raw.delete(*[f"raw{i}" for i in range(block, block + 10)])
    await store.close()
    await raw.aclose()
    mib = size * reps / (1024 * 1024)
    return {
        "vf_mib_s": mib / vf_seconds,
        "raw_mib_s": mib / raw_seconds,
        "ratio": raw_seconds / vf_seconds,
        "reps": reps,
    }


def scaling(servers: Servers, *, work: Path, kind: str, count: int) -> dict[str, Any]:
    """One 20 ms stage with 1, 2 and 4 competing replicas (videoflow's E2 shape).

    ``sleep`` waits 20 ms per item (I/O, a remote GPU); ``cpu`` does a fixed amount of
    computation per item (``SPIN_ROUNDS``, about 20 ms of one core of the machine
    this was written on), so the cores bound it whatever the replica count.
    """
    rounds = SPIN_ROUNDS if kind == "cpu" else 0
    found: dict[str, float] = {}  # keyed as JSON keys them
    for replicas in (1, 2, 4):
        flow = vf_flow(
            servers,
            work=work,
            flow=f"scale-{kind}-{replicas}",
            count=count,
            kind=kind,
            work_ms=20,
            rounds=rounds,
            replicas=replicas,
        )
        found[str(replicas)] = rate(flow["records"])
    return {
        "msgs_s": found,
        "speedup": {r: found[r] / found["1"] for r in found},
        "count": count,
        "work_ms": 20,
        "spin_rounds": rounds,
    }


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    servers: Servers = (start_nats(work / "nats"), start_redis(work / "redis"))
    try:
        results: dict[str, Any] = {
            "throughput": throughput(servers, work=work, count=args.count, reps=args.reps),
            "hop_latency": hop_latency(servers, work=work, depths=[1, 2, 4, 8], count=250),
        }
        blobs = sorted(
            (asyncio.run(blob_path(servers[1].url, size=1024 * 1024, reps=100)) for _ in range(3)),
            key=lambda run: float(run["ratio"]),
        )
        results["blob"] = {**blobs[1], "ratios": [run["ratio"] for run in blobs]}  # the median
        kinds = ("sleep", "cpu")
        results["scaling"] = {k: scaling(servers, work=work, kind=k, count=240) for k in kinds}
    finally:
        for server in servers:
            server.stop()
    results["machine"] = (
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )
    return results


def _cells(result: dict[str, Any] | None) -> dict[str, str]:
    """The figures of one run (``before`` or ``after``) as table cells."""
    if result is None:
        return {}
    tput = result["throughput"]["median"]
    chain = result["hop_latency"]
    blob = result["blob"]
    sleep = result["scaling"]["sleep"]["msgs_s"]
    cpu = result["scaling"]["cpu"]["msgs_s"]
    depths = chain["median_ms_by_depth"]
    return {
        "pipe": f"{tput['vf_msgs_s']:.0f} / {tput['raw_pipelined_msgs_s']:.0f} = "
        f"**{tput['ratio_vs_pipelined']:.2f}**",
        "await": f"{tput['vf_msgs_s']:.0f} / {tput['raw_awaited_msgs_s']:.0f} = "
        f"{tput['ratio_vs_awaited']:.2f}",
        "hop": f"**{chain['per_hop_ms']:.2f}**",
        "depths": " / ".join(f"{depths[d]:.1f}" for d in sorted(depths, key=int)),
        "blob": f"{blob['vf_mib_s']:.0f} / {blob['raw_mib_s']:.0f} = **{blob['ratio']:.2f}**",
        "sleep": " / ".join(f"{sleep[r]:.0f}" for r in sorted(sleep, key=int)),
        "cpu": " / ".join(f"{cpu[r]:.0f}" for r in sorted(cpu, key=int)),
    }


def table(results: dict[str, Any]) -> str:
    before, after = _cells(results.get("before")), _cells(results.get("after"))
    video = VIDEOFLOW
    vf_depths = " / ".join(f"{v:.1f}" for v in video["median_ms_by_depth"].values())
    vf_sleep = " / ".join(f"{v:.0f}" for v in video["scaling_sleep_msgs_s"].values())
    rows = [
        ("1 KiB msg/s, vf flow / raw pipelined loop (target ≥ 0.50)", "pipe", "—"),
        ("1 KiB msg/s, vf flow / raw awaited loop", "await", "—"),
        ("Per-hop latency, identity chain (ms, slope; target ≤ 1.9)", "hop", "1.9"),
        ("Median end-to-end ms at depth 1 / 2 / 4 / 8", "depths", vf_depths),
        ("1 MiB blob path MiB/s, vf / raw SET+GET (target ≥ 0.60)", "blob", "—"),
        ("20 ms sleeping stage, msg/s at 1 / 2 / 4 replicas", "sleep", vf_sleep),
        ("20 ms CPU-bound stage, msg/s at 1 / 2 / 4 replicas", "cpu", "—"),
    ]
    lines = [
        "| Measurement | vf before | vf after | videoflow |",
        "|---|---:|---:|---:|",
    ]
    for label, key, theirs in rows:
        lines.append(f"| {label} | {before.get(key, '—')} | {after.get(key, '—')} | {theirs} |")
    latest = results.get("after") or results.get("before") or {}
    if latest:
        lines += ["", *_closing(latest)]
    return "\n".join(lines)


def _spread(ratios: Iterable[float]) -> str:
    return " / ".join(f"{r:.2f}" for r in ratios)


def _closing(result: dict[str, Any]) -> list[str]:
    """The notes under the table: CPU per stage, and the ratios quoted in words."""
    tput = result["throughput"]["median"]
    stages = ", ".join(f"{k} {v:.0f}" for k, v in tput["vf_cpu_us_per_msg"].items())
    sleep, cpu = (result["scaling"][kind]["speedup"] for kind in ("sleep", "cpu"))
    piped = _spread(run["ratio_vs_pipelined"] for run in result["throughput"]["runs"])
    return [
        f"CPU per message (µs): vf stages {stages or 'n/a'}; the raw pipelined loop "
        f"(publisher and reader in one process) {tput['raw_cpu_us_per_msg']:.0f}.",
        "",
        f"Ratios: the vf flow moves 1 KiB messages at {tput['ratio_vs_awaited']:.0%} of the "
        f"awaited raw loop's rate and {tput['ratio_vs_pipelined']:.0%} of the pipelined "
        f"one's (runs: {piped}); an identity hop costs "
        f"{result['hop_latency']['per_hop_ms']:.2f} ms (videoflow: 1.9 ms); 1 MiB payloads "
        f"go through the blob path at {result['blob']['ratio']:.0%} of raw SET+GET (rounds: "
        f"{_spread(result['blob'].get('ratios', []))}); 2 and 4 replicas speed a "
        f"sleeping stage up {sleep['2']:.1f}x and {sleep['4']:.1f}x, a CPU-bound one "
        f"{cpu['2']:.1f}x and {cpu['4']:.1f}x (2 cores). Machine: {result['machine']}.",
    ]


def write_doc(text: str) -> None:
    doc = DOC.read_text(encoding="utf-8")
    block = f"{START}\n{text}\n{END}"
    if START in doc and END in doc:
        head, rest = doc.split(START, 1)
        doc = head + block + rest.split(END, 1)[1]
    else:
        doc = doc.rstrip("\n") + "\n\n## Runtime throughput and latency\n\n" + block + "\n"
    DOC.write_text(doc, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--count", type=int, default=5000, help="1 KiB messages per throughput run")
    parser.add_argument("--reps", type=int, default=3, help="throughput repetitions (medians)")
    parser.add_argument(
        "--record", choices=("after", "before"), default="after", help="which column to fill"
    )
    parser.add_argument("--no-save", action="store_true", help="print, write nothing")
    parser.add_argument("--render", action="store_true", help="re-render the saved results only")
    args = parser.parse_args()
    saved = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    saved = saved if "after" in saved or "before" in saved else {}
    if not args.render:
        with tempfile.TemporaryDirectory(prefix="vf-bench-") as tmp:
            work = Path(tmp)
            (work / "bench_nodes.py").write_text(NODES)
            (work / "graph.py").write_text(GRAPH)
            (work / "vf.yaml").write_text(
                "environments:\n  bench:\n    images:\n      default: bench:0\n"
            )
            sys.path.insert(0, str(work))
            saved[args.record] = measure(args, work)
    if not args.no_save:  # the measurements first: a table can always be re-rendered
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")
    text = table(saved)
    print(text)
    if not args.no_save:
        write_doc(text)


if __name__ == "__main__":
    main()
