"""Time the worker runtime's identity hop in several vf source trees, taking turns.

Each tree (any checkout or export of vf's sources, as for ``bench/compare.py``) runs the
runtime benchmark's identity flow (a producer, one identity processor and a consumer,
``--count`` items of 1 KiB through ``vf run-local``) in a fresh process. The trees take
turns, ``--reps`` rounds, against one nats-server and one Redis, so that all of them see
the machine at the same moments. This checkout is the tree labelled ``this``::

    git archive REV compiler runtime schemas templates kustomize | tar -x -C DIR
    python bench/runtime_compare.py before=DIR this [--count 5000] [--reps 4] --name NAME

Per tree: the CPU per item (µs) of the processor, the producer and the consumer, and the
items per second; medians with their spread (min-max), and the ratio of each tree's
processor CPU to the first tree's, taken within each round. Results go under ``NAME`` in
``bench/results/runtime-compare.json``; ``--no-save`` only prints.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "runtime-compare.json"
STAGES = {"hop": "hop0", "producer": "source", "consumer": "sink"}


def child(nats_url: str, redis_url: str, work: Path, flow: str, count: int) -> None:
    """One identity flow with the vf on ``PYTHONPATH``; prints its figures as JSON."""
    import runtime  # the benchmark's flow, run with the sources this process imported

    sys.path.insert(0, str(work))
    servers = (SimpleNamespace(url=nats_url), SimpleNamespace(url=redis_url))
    result = runtime.vf_flow(servers, work=work, flow=flow, count=count, depth=1)  # type: ignore[arg-type]
    figures = {k: round(result["cpu"][node] / count * 1e6, 2) for k, node in STAGES.items()}
    figures["items_s"] = round(runtime.rate(result["records"]), 1)
    print(json.dumps(figures))


def one_run(tree: Path | None, urls: tuple[str, str], work: Path, flow: str, count: int) -> Any:
    env = dict(os.environ)
    if tree is None:
        parts = [ROOT / "compiler", ROOT / "runtime"]
    else:
        parts = [tree / "compiler", tree / "runtime"]
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in parts)
    argv = [sys.executable, __file__, "--child", *urls, str(work), flow, str(count)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{flow} failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarise(runs: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """Medians and spreads per tree, and each tree's hop CPU over the first tree's, per round."""
    first = next(iter(runs))
    report: dict[str, Any] = {}
    for label, rounds in runs.items():
        keys = list(rounds[0])
        ratios = [r["hop"] / f["hop"] for r, f in zip(rounds, runs[first], strict=True)]
        report[label] = {
            "median": {k: statistics.median(r[k] for r in rounds) for k in keys},
            "spread": {k: [min(r[k] for r in rounds), max(r[k] for r in rounds)] for k in keys},
            f"hop_ratio_to_{first}": ratios,
        }
    return report


def runtime_yaml() -> str:
    """The benchmark project's vf.yaml, as ``bench/runtime.py`` writes it."""
    return "environments:\n  bench:\n    images:\n      default: bench:0\n"


def compare(trees: dict[str, Path | None], *, count: int, reps: int) -> dict[str, Any]:
    import runtime
    from vf_runtime.local.infra import start_nats, start_redis

    with tempfile.TemporaryDirectory(prefix="vf-runtime-compare-") as tmp:
        work = Path(tmp)
        (work / "bench_nodes.py").write_text(runtime.NODES)
        (work / "graph.py").write_text(runtime.GRAPH)
        (work / "vf.yaml").write_text(runtime_yaml())
        servers = (start_nats(work / "nats"), start_redis(work / "redis"))
        urls = (servers[0].url, servers[1].url)
        runs: dict[str, list[dict[str, float]]] = {label: [] for label in trees}
        load = [os.getloadavg()[0]]
        try:
            one_run(None, urls, work, "warm", 200)  # bytecode and page cache, not timed
            for rep in range(reps):
                for i, (label, tree) in enumerate(trees.items()):
                    runs[label].append(one_run(tree, urls, work, f"c{rep}t{i}", count))
                    print(f"round {rep} {label}: {runs[label][-1]}", file=sys.stderr)
                load.append(os.getloadavg()[0])
        finally:
            for server in servers:
                server.stop()
    return {
        "count": count,
        "reps": reps,
        "trees": list(trees),  # labels only: a tree's path says nothing once it is gone
        "load_average_1min": load,
        "machine": f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}",
        "trees_summary": summarise(runs),
        "runs": runs,
    }


def table(report: dict[str, Any]) -> str:
    first = report["trees"][0]
    lines = [
        f"| tree | processor CPU µs/item | / {first}, per round | producer | consumer | items/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, row in report["trees_summary"].items():
        cells = [
            f"{row['median'][k]:.1f} ({row['spread'][k][0]:.1f}-{row['spread'][k][1]:.1f})"
            for k in ("hop", "producer", "consumer")
        ]
        ratios = row[f"hop_ratio_to_{first}"]
        ratio = f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"
        spread = row["spread"]["items_s"]
        items = f"{row['median']['items_s']:.0f} ({spread[0]:.0f}-{spread[1]:.0f})"
        lines.append(f"| {label} | {cells[0]} | {ratio} | {cells[1]} | {cells[2]} | {items} |")
    return "\n".join(lines)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        nats_url, redis_url, work, flow, count = sys.argv[2:7]
        child(nats_url, redis_url, Path(work), flow, int(count))
        return
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("trees", nargs="+", help="LABEL=DIR of a vf source tree, or 'this'")
    parser.add_argument("--name", required=True, help="the key the results are saved under")
    parser.add_argument("--count", type=int, default=5000, help="1 KiB items per run")
    parser.add_argument("--reps", type=int, default=4, help="rounds, every tree once each")
    parser.add_argument("--no-save", action="store_true", help="only print the table")
    args = parser.parse_args()
    trees: dict[str, Path | None] = {}
    for spec in args.trees:
        label, _, path = spec.partition("=")
        tree = Path(path).resolve() if path else None
        if tree is not None and not (tree / "runtime" / "vf_runtime").is_dir():
            parser.error(f"{tree} holds no vf runtime (runtime/vf_runtime)")
        trees[label] = tree
    report = compare(trees, count=args.count, reps=args.reps)
    print(table(report))
    if not args.no_save:
        saved = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        saved[args.name] = report
        RESULTS.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
