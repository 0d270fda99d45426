"""Time what a GitOps controller does with the committed tree on every sync: render it.

Argo CD's repo-server and Flux's kustomize-controller run a kustomize build of
``overlays/<env>`` (Argo CD gives it 90 s by default, ``ARGOCD_EXEC_TIMEOUT``); Helm users
and Flux's helm-controller run ``helm template``/install of ``chart/`` with
``values-<env>.yaml``. This benchmark compiles the layered BATCH graphs of
``bench/compile.py`` (its builders, imported) with one environment and with two, then
renders each environment with the real ``kubectl kustomize`` and ``helm template``,
alternating, each under a time cap: a render still running at the cap is stopped and
reported as ``> cap``, not waited out. Renders run one at a time under ``nice``.

The projects get Argo CD Applications (a ``gitops:`` block with ``argocd: {}``), so vf
writes ``manifests/<env>`` where ``gitops.argocd.source: auto`` chooses it (ADR 182): Argo
CD then reads plain files instead of building the overlay. There is no Argo CD here; the
benchmark reports that folder's files and the seconds Python's libyaml takes to parse them
all, as a stand-in for the read.

It also reports what the API server would store for one environment of the flow: the
objects of the render, per kind, their count and their bytes per node (compact JSON, the
size etcd keeps before its own encoding).

Results go to ``bench/results/render.json`` and to the render section of
``docs/performance.md``.

Each size records its own repeat count, cap and load average, and ``--merge`` keeps the
sizes of the saved results that this run does not measure, and a measured size's set of
environments (``--envs``) that it does not: a size too slow to render three times can be
measured once, with its own cap, beside the others.

Usage: ``python bench/render.py [--sizes 1000,5000] [--repeat 3] [--cap 120] [--merge]
[--no-save]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile import filesystem, shape, update_doc, write_project
from vf.emit.shards import SHARD_OVER

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "render.json"
MARKS = ("<!-- render-table:start -->", "<!-- render-table:end -->")
SHARD_MARKS = ("<!-- shard-table:start -->", "<!-- shard-table:end -->")
TOOLS = ROOT / ".tools" / "bin"
SIZES = (1000, 5000)
KUSTOMIZE_DIRS = frozenset({"base", "components", "overlays"})
NAMESPACES = {"dev": "peerbench-dev", "prod": "peerbench"}
GITOPS = """gitops:
  repo_url: https://git.example.com/peerbench-deploy.git
  path: deploy
  argocd: {}
"""


def tool(name: str) -> str:
    found = TOOLS / name
    return str(found) if found.exists() else (shutil.which(name) or name)


def capped(argv: list[str], cwd: Path, cap: float, out: Path) -> dict[str, Any]:
    """Run ``argv`` under ``nice`` with its standard output in ``out``: wall and CPU seconds,
    peak RSS; stopped at ``cap`` seconds (``capped: true``)."""
    with out.open("wb") as sink, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(["nice", "-n", "10", *argv], cwd=cwd, stdout=sink, stderr=err)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            wall = time.perf_counter() - start
            if pid:
                break
            if wall > cap:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                return {"capped": True, "wall_s": round(cap, 1), "cpu_s": None}
            time.sleep(0.002)  # a coarser poll adds up to its period to every wall time
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            err.seek(0)
            raise RuntimeError(f"{argv} exited {code}: {err.read().decode()[-2000:]}")
    return {
        "capped": False,
        "wall_s": round(wall, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
    }


def manifests_read(folder: Path) -> dict[str, Any] | None:
    """Files of ``manifests/<env>`` and the seconds to parse them all; None when absent."""
    if not folder.is_dir():
        return None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    files = sorted(folder.iterdir())
    start = time.perf_counter()
    objects = sum(
        1 for f in files for doc in yaml.load_all(f.read_text(encoding="utf-8"), Loader=loader)
    )
    return {
        "files": len(files),
        "objects": objects,
        "bytes": sum(f.stat().st_size for f in files),
        "parse_s": round(time.perf_counter() - start, 3),
    }


def shard_renders(tree: Path, env: str, cap: float, work: Path) -> dict[str, Any] | None:
    """What the controllers render per sync of an environment delivered in shards (ADR
    220), summed over its shards: Argo CD's read of each folder (libyaml's parse, as for
    ``manifests/``) and the kustomize build Flux runs of each (a copy of the folder with the
    kustomization.yaml kustomize-controller generates: every YAML file a resource)."""
    folder = tree / "shards" / env
    if not folder.is_dir():
        return None
    start = kubectl_start(tree, cap, work)
    rows = []
    for shard in sorted(folder.iterdir()):
        read = manifests_read(shard)
        assert read is not None
        scratch = work / f"shard-{env}-{shard.name}"
        shutil.copytree(shard, scratch)
        files = sorted(p.name for p in scratch.iterdir())
        (scratch / "kustomization.yaml").write_text(
            "resources:\n" + "".join(f"- {name}\n" for name in files), encoding="utf-8"
        )
        built = capped([tool("kubectl"), "kustomize", str(scratch)], tree, cap, work / "s.yaml")
        shutil.rmtree(scratch)
        rows.append({**read, "build": built})
    builds = [r["build"] for r in rows]
    capped_any = any(b["capped"] for b in builds)
    return {
        "shards": len(rows),
        "objects_total": sum(r["objects"] for r in rows),
        "max_objects": max(r["objects"] for r in rows),
        "max_bytes": max(r["bytes"] for r in rows),
        "parse_s": round(sum(r["parse_s"] for r in rows), 3),
        "capped": capped_any,
        "kustomize_wall_s": round(sum(b["wall_s"] for b in builds), 3),
        "kustomize_cpu_s": None if capped_any else round(sum(b["cpu_s"] for b in builds), 3),
        # kustomize-controller builds in its own process: no kubectl start per shard
        "kubectl_start_wall_s": start,
        "less_start_wall_s": round(sum(b["wall_s"] for b in builds) - len(rows) * start, 3),
    }


def kubectl_start(tree: Path, cap: float, work: Path) -> float:
    """The median wall seconds of ``kubectl version --client`` (nine runs): the start every
    ``kubectl kustomize`` pays and kustomize-controller, which builds in its own process,
    does not (under cachegrind, 154 of the 180 million instructions of an empty build)."""
    argv = [tool("kubectl"), "version", "--client"]
    runs = [capped(argv, tree, cap, work / "v.txt")["wall_s"] for _ in range(9)]
    return round(statistics.median(runs), 3)


def stored(rendered: Path, nodes: int) -> dict[str, Any]:
    """Objects of one environment's render per kind: count and compact-JSON bytes."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    count: Counter[str] = Counter()
    size: Counter[str] = Counter()
    with rendered.open(encoding="utf-8") as text:
        for obj in yaml.load_all(text, Loader=loader):
            if obj:
                count[obj["kind"]] += 1
                size[obj["kind"]] += len(json.dumps(obj, separators=(",", ":")))
    total = sum(size.values())
    return {
        "objects": sum(count.values()),
        "bytes": total,
        "objects_per_node": round(sum(count.values()) / nodes, 3),
        "bytes_per_node": round(total / nodes),
        "by_kind": {k: {"objects": count[k], "bytes": size[k]} for k in sorted(count)},
    }


def compile_tree(graph: Path, envs: list[str], out: Path) -> float:
    argv = [str(Path(sys.executable).parent / "vf"), "compile", str(graph), "--out", str(out)]
    start = time.perf_counter()
    subprocess.run(
        [*argv, *[f"--env={e}" for e in envs]],
        cwd=graph.parent,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return round(time.perf_counter() - start, 3)


def renders(tree: Path, env: str, cap: float, work: Path) -> dict[str, tuple[list[str], Path]]:
    return {
        "kustomize": ([tool("kubectl"), "kustomize", f"overlays/{env}"], work / f"k-{env}.yaml"),
        "helm": (
            [
                tool("helm"),
                "template",
                "peerbench",
                "chart",
                "-f",
                f"chart/values-{env}.yaml",
                "--namespace",
                NAMESPACES[env],
            ],
            work / f"h-{env}.yaml",
        ),
    }


def spread(samples: list[dict[str, Any]], key: str) -> dict[str, Any]:
    if any(s["capped"] for s in samples):
        return {"capped": True, "runs": [s[key] for s in samples]}
    values = [float(s[key]) for s in samples]
    return {
        "capped": False,
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "runs": values,
    }


def measure(
    graph: Path, n: int, envs: list[str], repeat: int, cap: float, *, shards_only: bool = False
) -> dict[str, Any]:
    """Compile ``envs`` (all when empty), then render each environment ``repeat`` times,
    kustomize and helm alternating, and each shard once; ``shards_only``: the shards."""
    key = "two_envs" if not envs else "one_env"
    tree = graph.parent / key / "deploy"
    # the median of three compiles (the last one's tree is rendered): one compile's wall
    # moves by a fifth or more between runs
    compiles = [compile_tree(graph, envs, tree) for _ in range(3)]
    row: dict[str, Any] = {"compile_wall_s": statistics.median(compiles), "compiles": compiles}
    files = [p for p in tree.rglob("*") if p.is_file()]
    kustomize_files = [p for p in files if p.relative_to(tree).parts[0] in KUSTOMIZE_DIRS]
    row["tree"] = {
        "files": len(files),
        "kustomize_files": len(kustomize_files),
        "kustomize_bytes": sum(p.stat().st_size for p in kustomize_files),
    }
    for env in envs or sorted(NAMESPACES):
        if shards_only:
            row[env] = {"shards": shard_renders(tree, env, cap, graph.parent)}
            continue
        cases: dict[str, list[dict[str, Any]]] = {}
        runs = renders(tree, env, cap, graph.parent)
        for _ in range(repeat):
            for name, (argv, out) in runs.items():
                cases.setdefault(name, []).append(capped(argv, tree, cap, out))
                print(f"N={n} {key} {env} {name}: {cases[name][-1]}", file=sys.stderr)
        result = {
            name: {"wall_s": spread(s, "wall_s"), "cpu_s": spread(s, "cpu_s")}
            for name, s in cases.items()
        }
        result["manifests"] = manifests_read(tree / "manifests" / env)
        result["shards"] = shard_renders(tree, env, cap, graph.parent)
        done = [name for name, s in cases.items() if not any(r["capped"] for r in s)]
        if done:
            result["stored"] = stored(runs[done[-1]][1], n)
        row[env] = result
    return row


def _cell(s: dict[str, Any], cap: float, *, cpu: bool = False) -> str:
    if s["capped"]:  # stopped at the cap: its wall time is the cap, its CPU time unknown
        return "—" if cpu else f"> {cap:.0f}"
    if len(s["runs"]) == 1:
        return f"{s['median']:.2f}"
    return f"{s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f})"


def table(report: dict[str, Any]) -> str:
    lines = [
        "| N | envs | env | `kubectl kustomize` wall (s) | CPU (s) | `helm template` wall (s) "
        "| CPU (s) | objects / node | bytes / node | tree files (kustomize) "
        "| Argo CD reads | `manifests/<env>` parse (s) |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for n, sizes in sorted(report["sizes"].items(), key=lambda item: int(item[0])):
        cap = sizes.get("cap_s", report["cap_s"])
        for key in ("one_env", "two_envs"):
            row = sizes.get(key)
            if row is None:
                continue
            for env in sorted(k for k in row if k in NAMESPACES):
                r = row[env]
                st = r.get("stored", {})
                plain = r.get("manifests")
                reads = f"`manifests/{env}`" if plain else f"`overlays/{env}`"
                parse = f"{plain['parse_s']:.2f}" if plain else "—"
                lines.append(
                    f"| {n} | {1 if key == 'one_env' else 2} | {env} | "
                    f"{_cell(r['kustomize']['wall_s'], cap)} | "
                    f"{_cell(r['kustomize']['cpu_s'], cap, cpu=True)} | "
                    f"{_cell(r['helm']['wall_s'], cap)} | "
                    f"{_cell(r['helm']['cpu_s'], cap, cpu=True)} | "
                    f"{st.get('objects_per_node', '—')} | {st.get('bytes_per_node', '—'):,} | "
                    f"{row['tree']['kustomize_files']} | {reads} | {parse} |"
                )
    m = report["machine"]
    runs = "; ".join(
        f"{n} nodes: {row.get('repeat', report['repeat'])} "
        f"{'render' if row.get('repeat', report['repeat']) == 1 else 'alternating renders'} "
        f"each, capped at {row.get('cap_s', report['cap_s']):.0f} s, "
        f"load average {row.get('loadavg', m['loadavg'])} at the start"
        for n, row in sorted(report["sizes"].items(), key=lambda item: int(item[0]))
    )
    lines += [
        "",
        f"Medians, spread (min-max) in brackets, of {runs} (a capped render's CPU time is not "
        f"known: —); CPU is user + system seconds of the render process. "
        f"kustomize {report['versions']['kustomize']}, "
        f"helm {report['versions']['helm']}. Machine: {m['cpu_count']} CPUs, {m['platform']}, "
        f"shared with other work while it ran; trees on {report['filesystem']}.",
    ]
    return "\n".join(lines)


def shard_table(report: dict[str, Any]) -> str:
    """Per environment delivered in shards: what the controllers render per sync, summed
    over the shards, beside the compile."""
    lines = [
        "| N | envs | env | objects | compile wall (s) | shards | largest (objects / MB) "
        "| Argo CD: parse of every shard (s) | Flux: `kubectl kustomize` of every shard, "
        "wall / CPU (s) | Flux / compile (wall) | Flux less kubectl's start (s) / compile |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, sizes in sorted(report.get("shard_sizes", {}).items(), key=lambda i: int(i[0])):
        for key in ("one_env", "two_envs"):
            row = sizes.get(key) or {}
            for env in sorted(k for k in row if k in NAMESPACES):
                sh = row[env].get("shards")
                if not sh:
                    continue
                cpu = sh["kustomize_cpu_s"]
                ratio = sh["kustomize_wall_s"] / row["compile_wall_s"]
                less = sh.get("less_start_wall_s")
                net = "—" if less is None else f"{less:.2f} / {less / row['compile_wall_s']:.1f}x"
                lines.append(
                    f"| {n} | {1 if key == 'one_env' else 2} | {env} | {sh['objects_total']} | "
                    f"{row['compile_wall_s']:.2f} | {sh['shards']} | "
                    f"{sh['max_objects']} / {sh['max_bytes'] / 1e6:.2f} | {sh['parse_s']:.2f} | "
                    f"{sh['kustomize_wall_s']:.2f} / {'—' if cpu is None else f'{cpu:.2f}'} | "
                    f"{ratio:.1f}x | {net} |"
                )
    m = report.get("shard_machine") or {**report["machine"], "filesystem": report["filesystem"]}
    loads = "; ".join(
        f"{n} nodes: {row.get('loadavg', '?')}"
        for n, row in sorted(report.get("shard_sizes", {}).items(), key=lambda i: int(i[0]))
    )
    lines += [
        "",
        f"One render of each shard; the compile is the median of three `vf compile` runs "
        f"of the same environments (an earlier round's rows: one). "
        f"Less kubectl's start: less, per shard, the median wall of `kubectl version "
        f"--client` in the same run, which kustomize-controller's in-process builds do not "
        f"pay (—: not measured then). "
        f"Load average at the start of each size: {loads}. Machine: {m['cpu_count']} CPUs, "
        f"{m['platform']}, shared with other work while it ran; trees on {m['filesystem']}. "
        f"Sizes without a row are not sharded (at most {SHARD_OVER:,} objects per environment).",
    ]
    return "\n".join(lines)


def versions() -> dict[str, str]:
    out = subprocess.run(
        [tool("kubectl"), "version", "--client"], check=True, capture_output=True, text=True
    )
    kustomize = next(
        (line.split(":", 1)[1].strip() for line in out.stdout.splitlines() if "Kustomize" in line),
        "unknown",
    )
    helm = subprocess.run(
        [tool("helm"), "version", "--short"], check=True, capture_output=True, text=True
    )
    return {"kustomize": kustomize, "helm": helm.stdout.strip() or "unknown"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="e.g. 1000,5000")
    parser.add_argument("--repeat", type=int, default=3, help="renders per environment")
    parser.add_argument("--cap", type=float, default=120.0, help="seconds per render")
    parser.add_argument("--envs", default="one,two", help="one, two or both")
    parser.add_argument("--no-save", action="store_true", help="only print the table")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the saved sizes (and environment sets) this run does not measure",
    )
    parser.add_argument("--tmp", type=Path, default=None, help="where graphs and trees go")
    parser.add_argument(
        "--shards-only",
        action="store_true",
        help="compile and render only the shards (their own table), keeping the rest",
    )
    args = parser.parse_args()
    report: dict[str, Any] = {
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": f"{platform.system()} {platform.release()}",
            "python": platform.python_version(),
            "loadavg": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        },
        "versions": versions(),
        "cap_s": args.cap,
        "repeat": args.repeat,
        "filesystem": filesystem(args.tmp or Path(tempfile.gettempdir())),
        "sizes": {},
        "shard_sizes": {},
    }
    with tempfile.TemporaryDirectory(prefix="vf-render-", dir=args.tmp) as tmp:
        for n in (int(s) for s in args.sizes.split(",") if s):
            graph = write_project(Path(tmp), n)
            config = graph.parent / "vf.yaml"
            config.write_text(config.read_text(encoding="utf-8") + GITOPS, encoding="utf-8")
            row: dict[str, Any] = {
                "shape": shape(n),
                "repeat": args.repeat,
                "cap_s": args.cap,
                "loadavg": " ".join(f"{x:.1f}" for x in os.getloadavg()),
            }
            for key, envs in (("one_env", ["dev"]), ("two_envs", [])):
                if key.split("_")[0] in args.envs.split(","):
                    row[key] = measure(
                        graph, n, envs, args.repeat, args.cap, shards_only=args.shards_only
                    )
            report["shard_sizes" if args.shards_only else "sizes"][str(n)] = row
    if args.merge and RESULTS.exists():
        saved = json.loads(RESULTS.read_text(encoding="utf-8"))
        report["shard_sizes"] = {**saved.get("shard_sizes", {}), **report["shard_sizes"]}
        if args.shards_only:  # the render table and the machine it ran on stay as saved
            report["shard_machine"] = {**report["machine"], "filesystem": report["filesystem"]}
            for field in ("cap_s", "repeat", "machine", "versions", "filesystem"):
                report[field] = saved[field]
        kept = {n: row for n, row in saved["sizes"].items() if n not in report["sizes"]}
        for n, row in report["sizes"].items():  # and a size's environment sets not measured
            for envs in ("one_env", "two_envs"):
                if envs not in row and envs in saved["sizes"].get(n, {}):
                    row[envs] = saved["sizes"][n][envs]
        report["sizes"] = {**kept, **report["sizes"]}
    text, shards = table(report), shard_table(report)
    print(text, shards, sep="\n\n")
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        update_doc(text, MARKS)
        update_doc(shards, SHARD_MARKS)


if __name__ == "__main__":
    main()
