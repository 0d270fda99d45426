"""Time vf's schema checks on their own: the plans of a 1,000-node graph and its vf.yaml.

The synthetic graph of ``bench/compile.py`` (two environments) is compiled once; then,
in this process and warm, each plan's JSON form is checked against the plan schema with
``plan_schema_errors`` and the loaded ``vf.yaml`` against its schema (the check alone, not
the YAML reading), ``--repeat`` times each. The numbers are the median and the min-max of
the two plans checked together, and of one ``vf.yaml`` check; they go to
``bench/results/schema_check.json``.

Usage: ``python bench/schema_check.py [--nodes 1000] [--repeat 30] [--no-save]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compile import write_project

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "schema_check.json"


def _millis(samples: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(samples) * 1000, 2),
        "min_ms": round(min(samples) * 1000, 2),
        "max_ms": round(max(samples) * 1000, 2),
    }


def measure(nodes: int, repeat: int) -> dict[str, Any]:
    from vf.config.targets import _validate, read_yaml
    from vf.ir.plan import plan_to_json
    from vf.pipeline import CompileRequest, compile_project
    from vf.verify.checks import plan_schema_errors

    with tempfile.TemporaryDirectory() as work:
        graph = write_project(Path(work), nodes)
        result = compile_project(CompileRequest(graph=str(graph)))
        documents = [plan_to_json(plan) for plan in result.plans]
        config = graph.parent / "vf.yaml"
        targets = read_yaml(config)
        assert len(documents) == 2 and not any(map(plan_schema_errors, documents))
        _validate(targets, config)  # warm: the schema read and its checker built
        plans, configs = [], []
        for _ in range(repeat):
            start = time.perf_counter()
            for document in documents:
                plan_schema_errors(document)
            plans.append(time.perf_counter() - start)
            start = time.perf_counter()
            _validate(targets, config)
            configs.append(time.perf_counter() - start)
    return {
        "nodes": nodes,
        "plans": len(documents),
        "workloads_per_plan": len(documents[0]["workloads"]),
        "two_plans": _millis(plans),
        "vf_yaml": _millis(configs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    found = measure(args.nodes, args.repeat)
    found["machine"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
    }
    print(json.dumps(found, indent=2))
    if not args.no_save:
        RESULTS.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
