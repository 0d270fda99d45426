"""Time ``vf compile`` on synthetic layered BATCH graphs of 10 to 5000 nodes.

The graphs have the same shape and node names as the videoflow reference benchmark, so
the numbers can be set side by side: W lanes fed by one producer ``src``, D layers of
processors ``p-{j}-{d}`` with a two-parent join on every odd lane at layers d % 5 == 3,
R chained ``tail-k`` processors after lane 0 and one consumer ``sink-{j}`` per lane.

Every measurement is a fresh ``vf compile GRAPH --out DIR`` process into a new directory:
wall time covers interpreter start-up, imports, compilation, writing and exit; peak RSS is
the child's ``ru_maxrss`` as reported by ``os.wait4``. Results go to
``bench/results/compile.json`` and to the table section of ``docs/performance.md``.

``--profile`` adds where the time goes: one more child per size (one environment) runs
the compile under cProfile and reports the cumulative seconds of each stage's entry point,
the cyclic garbage collector's pauses (timed through ``gc.callbacks``) and how many
collections ran; the shares go to ``compile.json`` and to the profile section of
``docs/performance.md``.

Usage: ``python bench/compile.py [--sizes 10,100] [--repeat K] [--profile] [--no-save]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peer import DEFAULT_SOURCE, cached_bytecode, compile_driver, peer_label, peer_python

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "compile.json"
DOC = ROOT / "docs" / "performance.md"
START, END = "<!-- compile-table:start -->", "<!-- compile-table:end -->"
PROFILE_MARKS = ("<!-- compile-profile:start -->", "<!-- compile-profile:end -->")
# Stage entry points, as (module, function): each stage's cumulative time under cProfile.
STAGES = (
    ("vf.frontend.load", "load_flow", "load the graph module (user code)"),
    ("vf.config.targets", "load_targets", "read and check vf.yaml"),
    ("vf.frontend.lower", "lower", "lower to the graph IR"),
    ("vf.plan.planner", "plan_environment", "plan"),
    ("vf.render.objects", "render_plan", "render objects"),
    ("vf.verify.checks", "plan_document", "the plan's JSON form and its schema check"),
    ("vf.verify.checks", "verify", "verify objects (limits) and admission"),
    ("vf.textio.jsontext", "json_chunks", "JSON text (plans, chart values schema)"),
    ("vf.emit.kustomize.tree", "kustomize_files", "Kustomize tree"),
    ("vf.emit.helm.chart", "chart_files", "Helm chart"),
    ("vf.emit.gitops.manifests", "emit_gitops", "GitOps delivery files"),
    ("vf.tree.write", "_write", "write each file into the staging tree"),
    ("vf.tree.write", "commit", "sync and swap the tree in"),
    ("vf.textio.yamlout", "dump", "of which: YAML text, every emitter"),
    ("copy", "deepcopy", "of which: copy.deepcopy, every stage"),
)
SIZES = (10, 100, 1000, 5000)

NODES = '''"""Node classes of the compile benchmark's synthetic graph."""

from typing import Any

from vf import Consumer, Processor, Producer


class IntProducer(Producer):
    def __init__(self, start_value: int = 0, end_value: int = 99, **kw: Any) -> None:
        super().__init__(**kw)
        self.start_value, self.end_value, self._next = start_value, end_value, start_value

    def next(self) -> int:
        if self._next > self.end_value:
            raise StopIteration
        self._next += 1
        return self._next - 1


class IdentityProcessor(Processor):
    def process(self, item: Any) -> Any:
        return item


class JoinerProcessor(Processor):
    def process(self, left: Any, right: Any) -> Any:
        return (left, right)


class PrintConsumer(Consumer):
    def consume(self, item: Any) -> None:
        print(item)
'''

GRAPH = '''"""Synthetic layered {flow_type} graph of {n} nodes: {w} lanes, {d} layers, {r} tail \
nodes."""

from bench_nodes import IdentityProcessor, IntProducer, JoinerProcessor, PrintConsumer

from vf import {flow_type}, Flow

W, D, R = {w}, {d}, {r}


def build_flow() -> Flow:
    src = IntProducer(start_value=0, end_value=99, name="src")
    lane = [IdentityProcessor(name=f"p-{{j}}-1")(src) for j in range(W)]
    for d in range(2, D + 1):
        prev = lane
        lane = [
            JoinerProcessor(name=f"p-{{j}}-{{d}}")(prev[j], prev[j - 1])
            if d % 5 == 3 and j % 2 == 1
            else IdentityProcessor(name=f"p-{{j}}-{{d}}")(prev[j])
            for j in range(W)
        ]
    for k in range(1, R + 1):
        lane[0] = IdentityProcessor(name=f"tail-{{k}}")(lane[0])
    sinks = [PrintConsumer(name=f"sink-{{j}}")(lane[j]) for j in range(W)]
    return Flow(sinks, flow_type={flow_type}, flow_id="peerbench")
'''

CONFIG = """flow_id: peerbench
environments:
  dev:
    namespace: peerbench-dev
    images: {default: registry.example.com/vf-worker:bench}
  prod:
    namespace: peerbench
    images: {default: registry.example.com/vf-worker:bench}
"""


def shape(n: int) -> dict[str, int]:
    """Lanes, layers, tail length, joins and edges of the N-node graph."""
    w = max(2, round(math.sqrt(n) / 3))
    d = (n - 1 - w) // w
    r = (n - 1 - w) - w * d
    joins = sum(1 for layer in range(2, d + 1) if layer % 5 == 3) * (w // 2)
    return {"W": w, "D": d, "R": r, "joins": joins, "edges": w * (d + 1) + joins + r}


def write_project(root: Path, n: int, flow_type: str = "BATCH") -> Path:
    """The N-node layered graph's project under ``root``: a BATCH flow, or with
    ``flow_type="REALTIME"`` the same graph as a REALTIME flow (in its own folder)."""
    if flow_type not in ("BATCH", "REALTIME"):
        raise ValueError(f"flow_type is BATCH or REALTIME, not {flow_type!r}")
    s = shape(n)
    project = root / (f"n{n}" if flow_type == "BATCH" else f"n{n}-{flow_type.lower()}")
    project.mkdir()
    (project / "bench_nodes.py").write_text(NODES, encoding="utf-8")
    (project / "vf.yaml").write_text(CONFIG, encoding="utf-8")
    graph = project / "graph.py"
    graph.write_text(
        GRAPH.format(n=n, w=s["W"], d=s["D"], r=s["R"], flow_type=flow_type), encoding="utf-8"
    )
    return graph


def run_once(
    argv: list[str], cwd: Path, *, env: dict[str, str] | None = None
) -> tuple[float, int, float]:
    """Wall seconds, peak RSS (KiB) and CPU seconds (user + system) of one child process;
    raise if it fails."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{argv[1:]} exited {proc.returncode}: {err.read().decode()}")
    return wall, usage.ru_maxrss, usage.ru_utime + usage.ru_stime


def tree_stats(out: Path) -> tuple[int, int, str]:
    """Number of files, total bytes and a digest of the tree written to ``out``."""
    digest, files, size = hashlib.sha256(), 0, 0
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        data = path.read_bytes()
        digest.update(str(path.relative_to(out)).encode() + b"\0" + data + b"\0")
        files, size = files + 1, size + len(data)
    return files, size, digest.hexdigest()[:16]


def summary(samples: list[tuple[float, int, float]]) -> dict[str, Any]:
    """Medians and min-max of (wall s, peak RSS KiB, CPU s) samples."""
    walls, rss, cpus = ([round(float(s[i]), 4) for s in samples] for i in range(3))
    return {
        "wall_s": walls,
        "wall_median_s": round(statistics.median(walls), 4),
        "cpu_s": cpus,
        "cpu_median_s": round(statistics.median(cpus), 4),
        "peak_rss_kib": [int(k) for k in rss],
        "peak_rss_median_mib": round(statistics.median(rss) / 1024, 1),
    }


def vf_run(vf: str, graph: Path, envs: list[str], out: Path) -> tuple[float, int, float]:
    argv = [vf, "compile", str(graph), "--out", str(out), *[f"--env={e}" for e in envs]]
    return run_once(argv, graph.parent)


def peer_run(peer: str, n: int, namespaces: list[str], out: Path) -> tuple[float, int, float]:
    s = shape(n)
    driver = str(compile_driver())
    argv = [peer, driver, str(s["W"]), str(s["D"]), str(s["R"]), str(out), ",".join(namespaces)]
    return run_once(argv, out.parent)


def ratios(peer: dict[str, Any], vf: dict[str, Any], key: str) -> dict[str, Any]:
    """videoflow / vf of each alternating pair of runs: median and min-max."""
    pairs = [p / v for p, v in zip(peer[key], vf[key], strict=True)]
    return {
        "median": round(statistics.median(pairs), 3),
        "min": round(min(pairs), 3),
        "max": round(max(pairs), 3),
    }


def measure_size(vf: str, peer: str | None, graph: Path, n: int, repeat: int) -> dict[str, Any]:
    """vf (two environments, then one) and videoflow (one namespace, then two) in turn,
    ``repeat`` rounds; each run a fresh process into a new directory."""
    work = graph.parent
    cases: dict[str, list[tuple[float, int, float]]] = {}
    digests: dict[str, set[str]] = {}
    stats: dict[str, tuple[int, int]] = {}
    for i in range(repeat):
        for envs in ([], ["dev"]):
            key = "two_envs" if not envs else "one_env"
            out = work / f"out-{key}-{i}" / "deploy"  # alone: vf checks trees beside it
            cases.setdefault(key, []).append(vf_run(vf, graph, envs, out))
            files, size, digest = tree_stats(out)
            stats[key] = (files, size)
            digests.setdefault(key, set()).add(digest)
        for key, namespaces in (
            ("peer_one_env", ["peerbench-dev"]),
            ("peer_two_envs", ["peerbench-dev", "peerbench"]),
        ):
            if peer is not None:
                cases.setdefault(key, []).append(peer_run(peer, n, namespaces, work / f"{key}{i}"))
    row: dict[str, Any] = {key: summary(samples) for key, samples in cases.items()}
    for key, (files, size) in stats.items():
        envs = 2 if key == "two_envs" else 1
        row[key].update(files=files, bytes=size, bytes_per_node_env=round(size / n / envs))
    row["distinct_outputs"] = {key: len(found) for key, found in digests.items()}
    if peer is not None:
        row["videoflow_over_vf"] = {
            f"{metric}_{envs}": ratios(row[f"peer_{envs}"], row[envs], metric)
            for metric in ("cpu_s", "wall_s")
            for envs in ("one_env", "two_envs")
        }
        row["rss_vf_over_videoflow"] = {
            envs: ratios(row[envs], row[f"peer_{envs}"], "peak_rss_kib")
            for envs in ("one_env", "two_envs")
        }
    return row


def filesystem(path: Path) -> str:
    """The type of the filesystem holding ``path`` (from /proc/mounts), e.g. ext4 or tmpfs."""
    best, kind = "", "unknown"
    try:
        mounts = Path("/proc/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:
        return kind
    resolved = str(path.resolve())
    for line in mounts:
        fields = line.split()
        point = fields[1] if len(fields) > 2 else ""
        inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, kind = point, fields[2]
    return kind


def startup(argv: list[str], repeat: int = 10) -> float:
    return round(statistics.median(run_once(argv, ROOT)[0] for _ in range(repeat)), 4)


def _spread(values: list[float], fmt: str = ".2f", unit: str = "") -> str:
    """The median, then min-max in brackets."""
    return f"{statistics.median(values):{fmt}}{unit} ({min(values):{fmt}}-{max(values):{fmt}})"


def _ratio(ratio: dict[str, Any] | None, suffix: str = "x") -> str:
    if ratio is None:
        return "—"
    return f"{ratio['median']:.2f}{suffix} ({ratio['min']:.2f}-{ratio['max']:.2f})"


def table(report: dict[str, Any]) -> str:
    lines = [
        "| N | vf CPU, 1 env (s) | videoflow CPU, 1 env (s) | videoflow / vf CPU, 1 env | "
        "videoflow / vf wall, 1 env | vf CPU, 2 envs (s) | videoflow / vf CPU, 2 envs | "
        "peak RSS, vf / videoflow, 1 env (MiB) | RSS ratio, 1 env | files / bytes per node "
        "per env (1 env) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key, row in report["sizes"].items():
        one, two = row["one_env"], row["two_envs"]
        peer = row.get("peer_one_env")
        ratio = row.get("videoflow_over_vf", {})
        rss = row.get("rss_vf_over_videoflow", {})
        peer_rss = f"{peer['peak_rss_median_mib']:.0f}" if peer else "—"
        lines.append(
            f"| {key} | {_spread(one['cpu_s'])} | {_spread(peer['cpu_s']) if peer else '—'} | "
            f"{_ratio(ratio.get('cpu_s_one_env'))} | {_ratio(ratio.get('wall_s_one_env'))} | "
            f"{_spread(two['cpu_s'])} | {_ratio(ratio.get('cpu_s_two_envs'))} | "
            f"{one['peak_rss_median_mib']:.0f} / {peer_rss} | "
            f"{_ratio(rss.get('one_env'), '')} | {one['files']} / {one['bytes_per_node_env']:,} |"
        )
    m = report["machine"]
    peer_note = report.get("peer", "videoflow skipped")
    lines += [
        "",
        f"Medians of {report.get('repeat_note', 'the runs')}, spread (min-max) in brackets; "
        "ratios are taken per alternating pair of runs. "
        f"`vf --version` start-up: {report['startup_s']['vf_version']:.3f} s median of 10 "
        f"(bare `python -c pass`: {report['startup_s']['python']:.3f} s). "
        f"Machine: {m['cpu_count']} CPUs, {m['platform']}, Python {m['python']}; "
        f"trees written to {report['filesystem']}. {peer_note}.",
    ]
    return "\n".join(lines)


def update_doc(text: str, marks: tuple[str, str] = (START, END)) -> None:
    start, end = marks
    section = f"{start}\n{text}\n{end}"
    old = DOC.read_text(encoding="utf-8") if DOC.exists() else "# Performance\n"
    if start in old and end in old:
        head, rest = old.split(start, 1)
        new = head + section + rest.split(end, 1)[1]
    else:
        new = old.rstrip("\n") + "\n\n" + section + "\n"
    DOC.write_text(new, encoding="utf-8")


def profile_child(graph: str, out: str) -> None:
    """In a fresh interpreter: compile one environment under cProfile; print stage times."""
    import cProfile
    import gc
    import pstats

    pauses: list[float] = []
    started: list[float] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            pauses.append(time.perf_counter() - started.pop())

    gc.callbacks.append(on_gc)
    from vf.cli import cli

    profiler = cProfile.Profile()
    began = time.perf_counter()
    profiler.enable()
    try:
        cli.main(["compile", graph, "--out", out, "--env", "dev"], prog_name="vf")
    except SystemExit as done:
        if done.code:
            raise
    profiler.disable()
    total = time.perf_counter() - began
    gc.callbacks.remove(on_gc)
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    stages = {}
    for module, function, label in STAGES:
        suffix = module.replace(".", "/") + ".py"
        stages[label] = round(
            sum(v[3] for k, v in stats.items() if k[2] == function and k[0].endswith(suffix)), 4
        )
    stages["cyclic GC pauses (gc.callbacks)"] = round(sum(pauses), 4)
    print(
        json.dumps(
            {"profiled_total_s": round(total, 4), "gc_collections": len(pauses), "stages_s": stages}
        )
    )


def profile(vf_python: str, graph: Path) -> dict[str, Any]:
    out = graph.parent / "profiled" / "deploy"
    argv = [vf_python, __file__, "--profile-child", str(graph), str(out)]
    done = subprocess.run(argv, cwd=graph.parent, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def profile_table(report: dict[str, Any]) -> str:
    sizes = [k for k, row in report["sizes"].items() if "profile" in row]
    lines = [
        "| stage (cumulative, under cProfile, one environment) | "
        + " | ".join(f"N = {k}" for k in sizes)
        + " |",
        "|---|" + "---:|" * len(sizes),
    ]
    labels = [label for _, _, label in STAGES] + ["cyclic GC pauses (gc.callbacks)"]
    for label in labels:
        cells = []
        for key in sizes:
            row = report["sizes"][key]["profile"]
            seconds = row["stages_s"].get(label, 0.0)
            cells.append(f"{seconds:.2f} s ({100 * seconds / row['profiled_total_s']:.0f}%)")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    totals = [report["sizes"][k]["profile"] for k in sizes]
    lines.append(
        "| whole compile under the profiler | "
        + " | ".join(f"{t['profiled_total_s']:.2f} s, {t['gc_collections']} GCs" for t in totals)
        + " |"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="e.g. 10,100")
    parser.add_argument("--repeat", type=int, default=0, help="runs per size (default 5/3)")
    parser.add_argument("--no-save", action="store_true", help="only print the table")
    parser.add_argument(
        "--results",
        type=Path,
        default=None,
        help="write the JSON here and leave docs/performance.md alone (another Python's run)",
    )
    parser.add_argument("--profile", action="store_true", help="add the per-stage profile")
    parser.add_argument("--tmp", type=Path, default=None, help="where graphs and trees go")
    parser.add_argument("--peer", type=Path, default=DEFAULT_SOURCE, help="videoflow's source")
    parser.add_argument("--no-peer", action="store_true", help="measure vf alone")
    parser.add_argument(
        "--profile-child", nargs=2, metavar=("GRAPH", "OUT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.profile_child:
        profile_child(*args.profile_child)
        return
    cached_bytecode()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    vf = str(Path(sys.executable).parent / "vf")
    peer = None if args.no_peer else peer_python(args.peer)
    report: dict[str, Any] = {
        "machine": {
            "cpu_count": os.cpu_count(),
            "machine": platform.machine(),
            "platform": f"{platform.system()} {platform.release()}",
            "python": platform.python_version(),
        },
        "startup_s": {
            "python": startup([sys.executable, "-c", "pass"]),
            "vf_version": startup([vf, "--version"]),
        },
        "peer": peer_label(peer),
        "sizes": {},
    }
    report["filesystem"] = filesystem(args.tmp or Path(tempfile.gettempdir()))
    repeats = set()
    with tempfile.TemporaryDirectory(prefix="vf-bench-", dir=args.tmp) as tmp:
        for n in sizes:
            graph = write_project(Path(tmp), n)
            repeat = args.repeat or (3 if n >= 5000 else 5)
            repeats.add(repeat)
            run_once(
                [vf, "compile", str(graph), "--out", str(graph.parent / "warm" / "deploy")], ROOT
            )
            row: dict[str, Any] = {"repeat": repeat, "shape": shape(n)}
            row.update(measure_size(vf, peer, graph, n, repeat))
            if args.profile and n >= 1000:
                row["profile"] = profile(sys.executable, graph)
            report["sizes"][str(n)] = row
            print(f"N={n}: {row['one_env']['cpu_median_s']} s CPU, 1 env", file=sys.stderr)
    report["repeat_note"] = " / ".join(str(r) for r in sorted(repeats)) + " alternating runs"
    text = table(report)
    print(text)
    profiled = any("profile" in row for row in report["sizes"].values())
    if profiled:
        print(profile_table(report))
    if not args.no_save:
        results = args.results or RESULTS
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if not args.no_save and args.results is None:
        update_doc(text)
        if profiled:
            update_doc(profile_table(report), PROFILE_MARKS)


if __name__ == "__main__":
    main()
