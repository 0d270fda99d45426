"""Time ``vf compile`` against an older vf source tree, on the compile benchmark's graphs.

The two compilers run alternately (older, then this one, ``--repeat`` times per size), each
run a fresh process compiling one environment into a new directory, so both see the same
machine at the same moments. The older tree is any checkout or export of vf's sources::

    git archive REV compiler runtime schemas templates kustomize | tar -x -C DIR
    python bench/compare.py DIR --label REV [--sizes 1000,5000] [--repeat 3]

Results go to ``bench/results/compile-compare.json`` and to the comparison table of
``docs/performance.md``; ``--no-save`` only prints.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from compile import ROOT, filesystem, run_once, update_doc, write_project
from peer import cached_bytecode

RESULTS = ROOT / "bench" / "results" / "compile-compare.json"
MARKS = ("<!-- compile-compare:start -->", "<!-- compile-compare:end -->")
MAIN = "from vf.cli import main; main()"


def _medians(runs: list[tuple[float, int, float]]) -> dict[str, Any]:
    return {
        "wall_s": [round(r[0], 4) for r in runs],
        "wall_median_s": round(statistics.median(r[0] for r in runs), 4),
        "cpu_median_s": round(statistics.median(r[2] for r in runs), 4),
        "peak_rss_median_mib": round(statistics.median(r[1] for r in runs) / 1024, 1),
    }


def compare(older: Path, sizes: list[int], repeat: int, work: Path) -> dict[str, Any]:
    """Per size, the medians of the older compiler's runs and of this one's."""
    path = os.pathsep.join(str(older / part) for part in ("compiler", "runtime"))
    sides = {"before": {**os.environ, "PYTHONPATH": path}, "after": dict(os.environ)}
    sides["after"].pop("PYTHONPATH", None)
    out: dict[str, Any] = {}
    for n in sizes:
        graph = write_project(work, n)
        runs: dict[str, list[tuple[float, int, float]]] = {"before": [], "after": []}
        for i in range(repeat):
            for side, env in sides.items():
                target = graph.parent / f"{side}-{i}" / "deploy"  # alone: vf reads trees beside
                argv = [sys.executable, "-c", MAIN, "compile", str(graph), "--out", str(target)]
                runs[side].append(run_once([*argv, "--env", "dev"], graph.parent, env=env))
        out[str(n)] = {side: _medians(r) for side, r in runs.items()}
        print(f"N={n}: {out[str(n)]['after']['wall_median_s']} s", file=sys.stderr)
    return out


def table(report: dict[str, Any]) -> str:
    lines = [
        f"| N | before ({report['label']}): wall / CPU / peak | after: wall / CPU / peak | "
        "after / before, CPU |",
        "|---:|---:|---:|---:|",
    ]
    for key, row in report["sizes"].items():
        cells = [
            f"{s['wall_median_s']:.2f} s / {s['cpu_median_s']:.2f} s / "
            f"{s['peak_rss_median_mib']:.1f} MiB"
            for s in (row["before"], row["after"])
        ]
        ratio = row["after"]["cpu_median_s"] / row["before"]["cpu_median_s"]
        lines.append(f"| {key} | {cells[0]} | {cells[1]} | {ratio:.2f} |")
    lines.append("")
    lines.append(
        f"Medians of {report['repeat']} alternating runs of each, one environment; "
        f"trees written to {report['filesystem']}."
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("older", type=Path, help="an older vf source tree (compiler/, runtime/)")
    parser.add_argument("--label", required=True, help="what the older tree is, e.g. a commit")
    parser.add_argument("--sizes", default="1000,5000", help="e.g. 1000,5000")
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs per size")
    parser.add_argument("--no-save", action="store_true", help="only print the table")
    parser.add_argument("--tmp", type=Path, default=None, help="where graphs and trees go")
    args = parser.parse_args()
    if not (args.older / "compiler" / "vf" / "cli.py").is_file():
        parser.error(f"{args.older} holds no vf sources (compiler/vf/cli.py)")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    cached_bytecode()
    with tempfile.TemporaryDirectory(prefix="vf-compare-", dir=args.tmp) as tmp:
        report = {
            "label": args.label,
            "repeat": args.repeat,
            "filesystem": filesystem(Path(tmp)),
            "sizes": compare(args.older.resolve(), sizes, args.repeat, Path(tmp)),
        }
    text = table(report)
    print(text)
    if not args.no_save:
        RESULTS.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        update_doc(text, MARKS)


if __name__ == "__main__":
    main()
