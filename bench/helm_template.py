"""Time ``helm template`` of vf's chart with ``values-<env>.yaml`` (issue #44's render goal).

The chart's worker objects are rendered by the role templates vf ships
(``templates/helm/roles/*.yaml`` and ``_helpers.tpl``): their cost grows with the number of
workers, and a REALTIME flow's Deployments read more of the pod template than a BATCH
flow's Jobs. This benchmark compiles the layered graph of ``bench/compile.py`` (its
``write_project``) at one size, as a BATCH flow and as a REALTIME flow, with one
environment (``dev``), then runs ``helm template x chart -f chart/values-dev.yaml``
``--repeat`` times for each, alternating the flows. Each render is a fresh process: its
wall seconds and the user + system CPU seconds of the child (``os.wait4``). The load
average is recorded at the start of each flow's runs, and a digest of the rendered text
says whether two runs (or two versions of the templates) rendered the same objects.

``--baseline DIR`` compares two versions of the templates under the same load: the files
of ``DIR`` (say the ``chart/templates`` of a tree compiled before a change, or one variant
of ``_helpers.tpl`` under study) replace those of a copy of each flow's chart, and each
render of the compiled chart is followed by one of the copy (rows ``<flow>-baseline``).

Results go to ``bench/results/helm-template.json`` under ``--label`` (default
``current``; ``--label before`` kept the figures of the templates before a change) and to
the helm-template table of ``docs/performance.md``.

Usage: ``python bench/helm_template.py [--nodes 1000] [--repeat 5] [--flows batch,realtime]
[--label NAME] [--baseline DIR] [--no-save]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile import filesystem, update_doc, write_project

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "helm-template.json"
MARKS = ("<!-- helm-template-table:start -->", "<!-- helm-template-table:end -->")
HELM = ROOT / ".tools" / "bin" / "helm"
FLOWS = ("batch", "realtime")


def helm() -> str:
    return str(HELM) if HELM.exists() else (shutil.which("helm") or "helm")


def loadavg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def compile_tree(graph: Path) -> Path:
    """``vf compile`` of ``graph``'s dev environment; the tree's folder."""
    out = graph.parent / "deploy"
    vf = str(Path(sys.executable).parent / "vf")
    subprocess.run(
        [vf, "compile", str(graph), "--out", str(out), "--env=dev"],
        cwd=graph.parent,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return out


def render(tree: Path, out: Path) -> dict[str, float]:
    """One ``helm template`` process: wall and CPU (user + system) seconds, peak RSS."""
    argv = [helm(), "template", "x", "chart", "-f", "chart/values-dev.yaml"]
    with out.open("wb") as sink, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=tree, stdout=sink, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            err.seek(0)
            raise RuntimeError(f"helm template exited {code}: {err.read().decode()[-2000:]}")
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
    }


def spread(values: list[float]) -> dict[str, Any]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "runs": values,
    }


def baseline_tree(tree: Path, templates: Path) -> Path:
    """A copy of ``tree`` whose chart templates are replaced by the files of ``templates``."""
    copy = tree.with_name(f"{tree.name}-baseline")
    shutil.copytree(tree, copy)
    for path in sorted(templates.iterdir()):
        if path.is_file():
            shutil.copyfile(path, copy / "chart" / "templates" / path.name)
    return copy


def measure(
    work: Path, nodes: int, flows: list[str], repeat: int, baseline: Path | None
) -> dict[str, Any]:
    """Compile each flow type's tree (and its baseline copy), then render them ``repeat``
    times, alternating."""
    trees: dict[str, Path] = {}
    row: dict[str, Any] = {}
    for flow in flows:
        tree = compile_tree(write_project(work, nodes, flow.upper()))
        trees[flow] = tree
        if baseline is not None:
            trees[f"{flow}-baseline"] = baseline_tree(tree, baseline)
    for flow in trees:
        row[flow] = {"loadavg": [], "samples": [], "digests": set(), "workers": 0}
    for _ in range(repeat):
        for flow, tree in trees.items():
            out = work / f"{flow}.yaml"
            row[flow]["loadavg"].append(loadavg())
            row[flow]["samples"].append(render(tree, out))
            text = out.read_bytes()
            row[flow]["digests"].add(hashlib.sha256(text).hexdigest()[:16])
            row[flow]["workers"] = sum(
                text.count(f"\nkind: {k}\n".encode()) for k in ("Job", "Deployment", "StatefulSet")
            )
            print(f"{flow}: {row[flow]['samples'][-1]}", file=sys.stderr)
    result: dict[str, Any] = {}
    for flow, r in row.items():
        samples = r["samples"]
        result[flow] = {
            "wall_s": spread([s["wall_s"] for s in samples]),
            "cpu_s": spread([s["cpu_s"] for s in samples]),
            "peak_rss_mib": max(s["peak_rss_mib"] for s in samples),
            "loadavg": r["loadavg"],
            "digest": sorted(r["digests"]),
            "worker_objects": r["workers"],
        }
    return result


def _cell(s: dict[str, Any]) -> str:
    return f"{s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f})"


def table(report: dict[str, Any]) -> str:
    lines = [
        "| templates | N | flow | worker objects | `helm template` wall (s) | CPU (s) "
        "| load average (first run) | rendered text (sha256, 16) |",
        "|---|---:|---|---:|---:|---:|---|---|",
    ]
    for label, run in report["runs"].items():
        for flow in (f"{f}{s}" for f in FLOWS for s in ("-baseline", "")):
            r = run["flows"].get(flow)
            if r is None:
                continue
            name = flow.upper().replace("-BASELINE", " (baseline)")
            lines.append(
                f"| {label} | {run['nodes']} | {name} | {r['worker_objects']} | "
                f"{_cell(r['wall_s'])} | {_cell(r['cpu_s'])} | {r['loadavg'][0]} | "
                f"{', '.join(r['digest'])} |"
            )
    machines = "; ".join(
        f"{label}: {run['repeat']} alternating renders per flow, {run['machine']['cpu_count']} "
        f"CPUs, {run['machine']['platform']}, {run['helm']}, trees on {run['filesystem']}"
        + (", baseline: the templates before ADR 254" if run.get("baseline") else "")
        for label, run in report["runs"].items()
    )
    lines += [
        "",
        f"Medians, spread (min-max) in brackets; CPU is user + system seconds of the "
        f"`helm template` process. {machines}; the machine shared with other work while it ran.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000, help="size of the layered graph")
    parser.add_argument("--repeat", type=int, default=5, help="renders per flow type")
    parser.add_argument("--flows", default=",".join(FLOWS), help="batch, realtime or both")
    parser.add_argument("--label", default=None, help="name of the saved run (current)")
    parser.add_argument(
        "--baseline", type=Path, default=None, help="templates to render in turn with the chart's"
    )
    parser.add_argument("--no-save", action="store_true", help="only print the table")
    parser.add_argument("--tmp", type=Path, default=None, help="where graphs and trees go")
    args = parser.parse_args()
    flows = [f for f in args.flows.split(",") if f]
    if unknown := set(flows) - set(FLOWS):
        parser.error(f"unknown flow types: {sorted(unknown)}")
    helm_version = subprocess.run(
        [helm(), "version", "--short"], check=True, capture_output=True, text=True
    ).stdout.strip()
    run: dict[str, Any] = {
        "nodes": args.nodes,
        "repeat": args.repeat,
        "helm": f"helm {helm_version}",
        "filesystem": filesystem(args.tmp or Path(tempfile.gettempdir())),
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": f"{platform.system()} {platform.release()}",
        },
        "baseline": None if args.baseline is None else args.baseline.name,
    }
    with tempfile.TemporaryDirectory(prefix="vf-helm-template-", dir=args.tmp) as tmp:
        run["flows"] = measure(Path(tmp), args.nodes, flows, args.repeat, args.baseline)
    saved = json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.exists() else {}
    report = {"runs": {**saved.get("runs", {}), args.label or "current": run}}
    text = table(report)
    print(text)
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        update_doc(text, MARKS)


if __name__ == "__main__":
    main()
