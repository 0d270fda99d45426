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
import http.server
import io
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import redis

from chain import raw_chain, raw_nats
from compile import write_project
from frames import codec_copies, raw_frames
from machine import wake_penalty
from peer import DEFAULT_SOURCE, cached_bytecode, peer_flow, peer_label, peer_python, runtime_driver
from runtime_report import table, write_doc
from startup import compile_check, first_item, idle_rss, peer_first_item
from vf.commands.run_local.command import RunLocalRequest, run_local
from vf_runtime.credentials import store_key_prefix
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
SUMMARY = re.compile(r"\[(\S+)/r\d+\] .* summary: .*cpu_seconds=([\d.]+)")
Servers = tuple[LocalServer, LocalServer]


@dataclasses.dataclass
class Peer:
    """videoflow's interpreter, when it is measured beside vf."""

    python: str | None = None
    nats: str = ""


PEER = Peer()
SPIN_ROUNDS = 360_000  # the CPU-bound stage's loop: about 20 ms of one core here
NODES = """
import json, os, time
from vf import Consumer, Processor, Producer

if os.environ.get("B_PIDS") and os.environ.get("VF_NODE_NAME"):  # tracing_instructions.py
    with open(os.environ["B_PIDS"], "a") as pids:
        pids.write(f"{os.getpid()} {os.environ['VF_NODE_NAME']}\\n")

class Source(Producer):
    def __init__(self, count=100, size=1024, rate=0.0, frames=False, **kw):
        super().__init__(**kw)
        self.count, self.size, self.rate, self.n = count, size, rate, 0
        self.frames, self.next_at = frames, None
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
        if self.frames:  # a 1080p bgr8 frame whose first 16 bytes say which and when
            import numpy
            frame = numpy.zeros((1080, 1920, 3), dtype=numpy.uint8)
            frame.reshape(-1)[:16].view("<f8")[:] = (self.n, time.time())
            return frame
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
        if not isinstance(item, dict):  # a frame
            i, t0 = (float(v) for v in item.reshape(-1)[:16].view("<f8"))
            item = {"i": int(i), "t0": t0}
        self.out.write(json.dumps([item["i"], item["t0"], time.time()]) + "\\n")
"""

GRAPH = """
import os
from bench_nodes import Identity, Sink, Source, Work
from vf import BATCH, Flow

def build_flow():
    node = Source(count=int(os.environ["B_COUNT"]), size=int(os.environ["B_SIZE"]),
                  rate=float(os.environ["B_RATE"]), frames=bool(os.environ["B_FRAMES"]),
                  name="source")
    for depth in range(int(os.environ["B_DEPTH"])):
        node = Identity(name=f"hop{depth}")(node)
    if os.environ["B_WORK"]:
        node = Work(ms=float(os.environ["B_WORK_MS"]), rounds=int(os.environ["B_WORK_ROUNDS"]),
                    nb_tasks=int(os.environ["B_REPLICAS"]), name="work")(node)
    sink = Sink(path=os.environ["B_OUT"], name="sink")(node)
    return Flow([sink], flow_type=BATCH, flow_id=os.environ["B_FLOW"])
"""


def bench_project(work: Path) -> Path:
    """``work`` holding the bench graph, its nodes and a vf.yaml, on ``sys.path``."""
    (work / "bench_nodes.py").write_text(NODES)
    (work / "graph.py").write_text(GRAPH)
    (work / "vf.yaml").write_text("environments:\n  bench:\n    images:\n      default: bench:0\n")
    sys.path.insert(0, str(work))
    return work


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
        B_FRAMES="1" if params.get("frames") else "",
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
    """Raw loops, the raw three-process chain, the vf flow and videoflow's, interleaved rep
    by rep; medians and per-rep ratios."""
    runs: list[dict[str, Any]] = []
    for rep in range(reps):
        awaited = asyncio.run(raw_nats(servers[0].url, count=count, size=1024, pipelined=False))
        pipelined = asyncio.run(raw_nats(servers[0].url, count=count, size=1024, pipelined=True))
        v4 = asyncio.run(
            raw_nats(servers[0].url, count=count, size=1024, pipelined=True, envelope=True)
        )
        chain = raw_chain(servers[0].url, count=count, size=1024)
        flow = vf_flow(servers, work=work, flow=f"tput{rep}", count=count, depth=1)
        vf = rate(flow["records"])
        run = {
            "raw_awaited_msgs_s": awaited["msgs_s"],
            "raw_pipelined_msgs_s": pipelined["msgs_s"],
            "raw_cpu_us_per_msg": pipelined["cpu_us_per_msg"],
            "raw_v4_msgs_s": v4["msgs_s"],
            "raw_v4_cpu_us_per_msg": v4["cpu_us_per_msg"],
            "raw_chain_msgs_s": chain["msgs_s"],
            "raw_chain_cpu_us_per_msg": chain["cpu_us_per_msg"],
            "vf_msgs_s": vf,
            "vf_cpu_us_per_msg": {k: v / count * 1e6 for k, v in flow["cpu"].items()},
            "ratio_vs_pipelined": vf / pipelined["msgs_s"],
            "ratio_vs_awaited": vf / awaited["msgs_s"],
            "ratio_vs_chain": vf / chain["msgs_s"],
        }
        if PEER.python:
            theirs = rate(
                peer_records(servers, work=work, flow=f"ptput{rep}", count=count, depth=1)
            )
            run.update(videoflow_msgs_s=theirs, ratio_vs_videoflow=vf / theirs)
        runs.append(run)
    keys = [k for k, v in runs[0].items() if isinstance(v, float)]
    medians: dict[str, Any] = {k: statistics.median(r[k] for r in runs) for k in keys}
    for key in ("vf_cpu_us_per_msg", "raw_chain_cpu_us_per_msg"):
        medians[key] = {s: statistics.median(r[key][s] for r in runs) for s in runs[0][key]}
    spread = {k: [min(r[k] for r in runs), max(r[k] for r in runs)] for k in keys}
    return {"count": count, "reps": reps, "median": medians, "spread": spread, "runs": runs}


class _Collector(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that takes every export and keeps nothing."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def tracing_cost(servers: Servers, *, work: Path, count: int, reps: int) -> dict[str, Any]:
    """CPU per item of each worker of one identity hop (source, hop0, sink) with tracing off
    and at 1 % sampling (TRACE-5), alternating rep by rep; the spans go to a collector that
    discards them. Medians, spreads (min-max) and each worker's ratio on / off."""
    collector = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    sampled = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_address[1]}",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.01",
    }
    found: dict[str, list[dict[str, float]]] = {"off": [], "sampled_1pct": []}
    try:
        for rep in range(reps):
            for label, runs in found.items():
                if label != "off":
                    os.environ.update(sampled)
                try:
                    flow = vf_flow(
                        servers, work=work, flow=f"trace{rep}{label[:3]}", count=count, depth=1
                    )
                finally:
                    for key in sampled:
                        os.environ.pop(key, None)
                runs.append({node: cpu / count * 1e6 for node, cpu in flow["cpu"].items()})
    finally:
        collector.shutdown()
    nodes = sorted(found["off"][0])
    median = {
        k: {n: statistics.median(r[n] for r in runs) for n in nodes} for k, runs in found.items()
    }
    spread = {
        k: {n: [min(r[n] for r in runs), max(r[n] for r in runs)] for n in nodes}
        for k, runs in found.items()
    }
    ratio = {n: median["sampled_1pct"][n] / median["off"][n] for n in nodes}
    return {
        "count": count,
        "cpu_us_per_msg": median,
        "spread": spread,
        "ratio": ratio,
        "runs": found,
    }


def peer_records(servers: Servers, *, work: Path, **params: Any) -> list[list[float]]:
    """The sink records of one bench flow through videoflow's local engine."""
    assert PEER.python is not None
    records: list[list[float]] = peer_flow(
        PEER.python, work, nats_url=servers[0].url, redis_url=servers[1].url, **params
    )
    return records


def _latencies(records: list[list[float]]) -> list[float]:
    return sorted((r[2] - r[1]) * 1000 for r in records)


def hop_latency(servers: Servers, *, work: Path, depths: list[int], count: int) -> dict[str, Any]:
    """Median end-to-end latency of a paced identity chain per depth, and the slope per hop;
    vf and videoflow alternate depth by depth."""
    found: dict[str, dict[str, float]] = {"vf": {}, "vf_p95": {}, "videoflow": {}}
    for depth in depths:
        flow = vf_flow(
            servers, work=work, flow=f"chain{depth}", count=count, rate=50.0, depth=depth
        )
        latencies = _latencies(flow["records"])
        found["vf"][str(depth)] = statistics.median(latencies)
        found["vf_p95"][str(depth)] = latencies[int(0.95 * (len(latencies) - 1))]
        if PEER.python:
            theirs = peer_records(
                servers, work=work, flow=f"pchain{depth}", count=count, rate=50.0, depth=depth
            )
            found["videoflow"][str(depth)] = statistics.median(_latencies(theirs))
    result: dict[str, Any] = {
        "median_ms_by_depth": found["vf"],
        "p95_ms_by_depth": found["vf_p95"],
        "per_hop_ms": statistics.linear_regression(depths, list(found["vf"].values())).slope,
    }
    if found["videoflow"]:
        result["videoflow_median_ms_by_depth"] = found["videoflow"]
        slope = statistics.linear_regression(depths, list(found["videoflow"].values())).slope
        result["videoflow_per_hop_ms"] = slope
    return result


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
    store = BlobStore.from_url(url, ttl_seconds=600, prefix=store_key_prefix("bench"))
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
    theirs: dict[str, float] = {}
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
        if PEER.python and kind == "sleep":
            theirs[str(replicas)] = rate(
                peer_records(
                    servers,
                    work=work,
                    flow=f"pscale-{kind}-{replicas}",
                    count=count,
                    kind=kind,
                    work_ms=20,
                    rounds=rounds,
                    replicas=replicas,
                )
            )
    return {
        "videoflow_msgs_s": theirs,
        "msgs_s": found,
        "speedup": {r: found[r] / found["1"] for r in found},
        "count": count,
        "work_ms": 20,
        "spin_rounds": rounds,
    }


def frames(servers: Servers, *, work: Path, count: int, reps: int) -> dict[str, Any]:
    """1080p frames through the 3-stage vf flow and the raw Redis + NATS loop, alternating;
    then a paced vf run (10 frames/s) for the latency of one frame on a quiet flow."""
    runs = []
    for rep in range(reps):
        raw = raw_frames(servers[0].url, servers[1].url, count=count)
        flow = vf_flow(servers, work=work, flow=f"frames{rep}", count=count, depth=1, frames=True)
        vf, theirs = rate(flow["records"]), rate(raw)
        runs.append(
            {
                "vf_frames_s": vf,
                "raw_frames_s": theirs,
                "ratio": vf / theirs,
                "vf_latency_ms": statistics.median(_latencies(flow["records"])),
                "raw_latency_ms": statistics.median(_latencies(raw)),
            }
        )
    paced = vf_flow(
        servers, work=work, flow="frames-paced", count=30, depth=1, frames=True, rate=10.0
    )
    median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    spread = {k: [min(r[k] for r in runs), max(r[k] for r in runs)] for k in runs[0]}
    return {
        "count": count,
        "median": median,
        "spread": spread,
        "runs": runs,
        "paced_latency_ms": statistics.median(_latencies(paced["records"])),
        "codec_copies": codec_copies(),
    }


def startup(work: Path, *, reps: int) -> dict[str, Any]:
    """First item of a 10-node run-local (vf, then videoflow), idle RSS, ``--check``."""
    vf = str(Path(sys.executable).parent / "vf")
    found: dict[str, Any] = {"first_item_s": [], "videoflow_first_item_s": []}
    for rep in range(reps):
        found["first_item_s"].append(first_item(vf, work, rep=rep))
        if PEER.python:
            spec = {"work": str(work), "count": 20, "size": 64, "rate": 0.0, "depth": 8}
            spec.update(kind="", work_ms=0, rounds=0, replicas=1, flow=f"pfirst{rep}")
            spec.update(out=str(work / f"pfirst{rep}.jsonl"), nats=PEER.nats, redis="")
            seconds = peer_first_item(PEER.python, runtime_driver(work), work, spec)
            found["videoflow_first_item_s"].append(seconds)
    found["idle_rss_mib"] = idle_rss(vf, work)
    graph = write_project(work, 50)
    found["check_50_nodes_3_envs"] = compile_check(vf, graph, repeat=10)
    return found


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    servers: Servers = (start_nats(work / "nats"), start_redis(work / "redis"))
    PEER.nats = servers[0].url
    paced = 50 if args.quick else 250  # items of the latency and scaling runs
    try:
        results: dict[str, Any] = {
            "throughput": throughput(servers, work=work, count=args.count, reps=args.reps),
            "wake_us_before": wake_penalty(),
            "hop_latency": hop_latency(servers, work=work, depths=[1, 2, 4, 8], count=paced),
            "wake_us_after": wake_penalty(),
        }
        blobs = sorted(
            (asyncio.run(blob_path(servers[1].url, size=1024 * 1024, reps=100)) for _ in range(3)),
            key=lambda run: float(run["ratio"]),
        )
        results["blob"] = {**blobs[1], "ratios": [run["ratio"] for run in blobs]}  # the median
        kinds = ("sleep", "cpu")
        results["scaling"] = {k: scaling(servers, work=work, kind=k, count=paced) for k in kinds}
        results["frames"] = frames(servers, work=work, count=args.frames, reps=args.reps)
        results["startup"] = startup(work, reps=args.reps)
        results["tracing"] = tracing_cost(servers, work=work, count=args.count, reps=args.reps)
    finally:
        for server in servers:
            server.stop()
    results["machine"] = (
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )
    results["peer"] = peer_label(PEER.python)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--count", type=int, default=5000, help="1 KiB messages per throughput run")
    parser.add_argument("--reps", type=int, default=3, help="throughput repetitions (medians)")
    parser.add_argument(
        "--record", choices=("after", "before"), default="after", help="which column to fill"
    )
    parser.add_argument("--no-save", action="store_true", help="print, write nothing")
    parser.add_argument(
        "--results",
        type=Path,
        default=RESULTS,
        help="the JSON to fill; another file than the default leaves docs/performance.md alone",
    )
    parser.add_argument("--render", action="store_true", help="re-render the saved results only")
    parser.add_argument("--frames", type=int, default=40, help="1080p frames per frame run")
    parser.add_argument("--peer", type=Path, default=DEFAULT_SOURCE, help="videoflow's source")
    parser.add_argument("--no-peer", action="store_true", help="measure vf alone")
    parser.add_argument("--quick", action="store_true", help="short latency and scaling runs")
    args = parser.parse_args()
    cached_bytecode()
    if not args.render and not args.no_peer:
        PEER.python = peer_python(args.peer)
    if not args.render:  # compile every module's bytecode once, before anything is timed
        warm = (
            "import vf.cli, vf.pipeline, vf.commands.run_local.command, "
            "vf_runtime.worker.replica, numpy, redis"
        )
        subprocess.run([sys.executable, "-c", warm], check=True)
        if PEER.python:
            warm = "import videoflow.worker, videoflow.engines.local, numpy, redis"
            subprocess.run([PEER.python, "-c", warm], check=True)
    saved = json.loads(args.results.read_text()) if args.results.exists() else {}
    saved = saved if "after" in saved or "before" in saved else {}
    if not args.render:
        with tempfile.TemporaryDirectory(prefix="vf-bench-") as tmp:
            work = bench_project(Path(tmp))
            saved[args.record] = measure(args, work)
    if not args.no_save:  # the measurements first: a table can always be re-rendered
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")
    text = table(saved)
    print(text)
    if not args.no_save and args.results == RESULTS:
        write_doc(text)


if __name__ == "__main__":
    main()
