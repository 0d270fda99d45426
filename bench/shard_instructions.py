"""Instructions kustomize executes to build one node shard, and what each part of a worker's
Job costs of them (issue 45).

``bench/render.py`` times every shard's ``kubectl kustomize`` in seconds, which a shared
machine moves by a fifth, and each process pays kubectl's start. The instructions a build
executes do not depend on the load, and a build of an empty kustomization counts the
start alone. This compiles the layered 1,000-node graph of ``bench/compile.py`` with Flux
delivery (16 node shards), takes one node shard, and counts, under valgrind's cachegrind
(``--cache-sim=no``, Go with one thread and no garbage collector), the build of:

- the empty kustomization (kubectl's start and kustomize's set-up);
- the shard as Flux builds it (a kustomization.yaml listing its files);
- the same Jobs with one part taken out of each: the two ``secretKeyRef`` variables, the
  variables every worker has alike, the labels, or with an unknown kind (so kustomize
  knows none of the Job's fields).

Instructions compare the variants with each other, not kustomize with vf's compile: Go's
collector is off here and Python's interpreter executes many more instructions a second.

The cost per Job is (shard - empty) / Jobs. Needs ``valgrind`` (Debian: ``apt-get install
valgrind``); a few minutes. Unless ``--no-save``, writes
``bench/results/shard-instructions.json``.

Usage: ``python bench/shard_instructions.py [--nodes 1000] [--no-save]``
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile import write_project

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "shard-instructions.json"
KUBECTL = ROOT / ".tools" / "bin" / "kubectl"
GITOPS = "gitops:\n  repo_url: https://git.example.com/x.git\n  path: deploy\n  flux: {}\n"
REFS = re.compile(r"I\s+refs:\s+([\d,]+)")
# the variables every worker of the bench's flow has with one value
ALIKE = {"VF_BLOB_READERS", "VF_ENVELOPE_VERSION", "VF_FLOW_ID", "VF_FLOW_TYPE"}
ALIKE |= {"VF_HEALTH_PORT", "VF_RUN_ID"}
Obj = dict[str, Any]


def _container(job: Obj) -> Obj:
    container: Obj = job["spec"]["template"]["spec"]["containers"][0]
    return container


def _no_secret_refs(job: Obj) -> None:
    container = _container(job)
    container["env"] = [e for e in container["env"] if "valueFrom" not in e]


def _no_alike(job: Obj) -> None:
    container = _container(job)
    container["env"] = [e for e in container["env"] if e["name"] not in ALIKE]


def _no_labels(job: Obj) -> None:
    job["metadata"].pop("labels", None)
    job["spec"]["template"]["metadata"].pop("labels", None)


def _unknown_kind(job: Obj) -> None:
    job["apiVersion"], job["kind"] = "example.com/v1", "Thing"


VARIANTS: dict[str, Callable[[Obj], None] | None] = {
    "shard as compiled": None,
    "without the two secretKeyRef variables": _no_secret_refs,
    "without the variables every worker has alike": _no_alike,
    "without labels": _no_labels,
    "an unknown kind": _unknown_kind,
}


def counted(argv: list[str]) -> int:
    """Instructions ``argv`` executes, every thread and child process of it (Go: one
    thread, no collector)."""
    env = {**os.environ, "GOMAXPROCS": "1", "GOGC": "off"}
    tool = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--trace-children=yes"]
    tool.append("--cachegrind-out-file=/dev/null")
    done = subprocess.run([*tool, *argv], capture_output=True, text=True, env=env, check=True)
    found = REFS.findall(done.stderr)
    assert found, done.stderr[-2000:]
    return sum(int(n.replace(",", "")) for n in found)


def instructions(folder: Path) -> int:
    """Instructions of ``kubectl kustomize folder``."""
    return counted([str(KUBECTL), "kustomize", str(folder)])


def _compile(graph: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "vf", "compile", str(graph), "--out", str(out), "--env", "dev"]


def _kustomization(folder: Path, jobs: list[Obj]) -> Path:
    folder.mkdir(parents=True)
    (folder / "jobs.yaml").write_text(yaml.safe_dump_all(jobs), encoding="utf-8")
    (folder / "kustomization.yaml").write_text("resources:\n- jobs.yaml\n", encoding="utf-8")
    return folder


def node_shard(tmp: Path, nodes: int) -> Path:
    """A node shard of the compiled tree, with the kustomization.yaml Flux generates."""
    graph = write_project(tmp, nodes)
    config = graph.parent / "vf.yaml"
    config.write_text(config.read_text(encoding="utf-8") + GITOPS, encoding="utf-8")
    out = tmp / "deploy"
    subprocess.run(_compile(graph, out), check=True, capture_output=True)
    shard = out / "shards" / "dev" / "01"
    files = sorted(p.name for p in shard.iterdir())
    listed = "".join(f"- {name}\n" for name in files)
    (shard / "kustomization.yaml").write_text(f"resources:\n{listed}", encoding="utf-8")
    return shard


def measure(nodes: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="vf-shard-instr-") as name:
        tmp = Path(name)
        shard = node_shard(tmp, nodes)
        jobs = [yaml.safe_load(p.read_text()) for p in sorted(shard.glob("job-*.yaml"))]
        empty = tmp / "empty"
        empty.mkdir()
        (empty / "kustomization.yaml").write_text("resources: []\n", encoding="utf-8")
        base = instructions(empty)
        rows = {}
        for label, change in VARIANTS.items():
            folder = shard
            if change is not None:
                changed = [copy.deepcopy(job) for job in jobs]
                for job in changed:
                    change(job)
                folder = _kustomization(tmp / label.replace(" ", "-"), changed)
            total = instructions(folder)
            rows[label] = {"instructions": total, "per_job": round((total - base) / len(jobs))}
        return {
            "nodes": nodes,
            "jobs": len(jobs),
            "empty": base,
            "variants": rows,
        }


def table(report: dict[str, Any]) -> str:
    lines = ["| build of one node shard | instructions | per Job, less the empty build |"]
    lines.append("|---|---:|---:|")
    lines.append(f"| empty kustomization | {report['empty']:,} | |")
    whole = report["variants"]["shard as compiled"]["per_job"]
    for label, row in report["variants"].items():
        share = f" ({row['per_job'] / whole:.0%})" if label != "shard as compiled" else ""
        lines.append(f"| {label} | {row['instructions']:,} | {row['per_job']:,}{share} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    report = measure(args.nodes)
    report["machine"] = {"platform": f"{platform.system()} {platform.release()}"}
    version = subprocess.run(
        [str(KUBECTL), "version", "--client"], capture_output=True, text=True, check=True
    )
    report["kubectl"] = version.stdout.strip().splitlines()[0]
    print(table(report))
    print(f"{report['jobs']} Jobs in the shard; {report['kubectl']}")
    if not args.no_save:
        RESULTS.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
