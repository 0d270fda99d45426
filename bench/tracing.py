"""The CPU tracing costs a worker at 1 % sampling (issue 47: at most 3 % of a worker).

Runs bench/runtime.py's ``tracing_cost``: one identity hop (source → hop0 → sink) of
``--count`` 1 KiB items through ``vf run-local`` on a local nats-server and Redis, with
tracing off and at ``parentbased_traceidratio`` 0.01 alternating rep by rep, the spans
going to an OTLP/HTTP endpoint that discards them. Each worker's CPU per item comes from
its summary line (the CPU after ``open()``: the SDK's one-off import is not in it).
Prints medians and spreads; unless ``--no-save``, fills the ``--record`` column of
``bench/results/tracing.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
from pathlib import Path

from runtime import bench_project, tracing_cost
from vf_runtime.local.infra import start_nats, start_redis

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "tracing.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--count", type=int, default=5000, help="1 KiB items per run")
    parser.add_argument("--reps", type=int, default=3, help="runs of each, alternating")
    parser.add_argument("--record", choices=("after", "before"), default="after")
    parser.add_argument("--no-save", action="store_true", help="print, write nothing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vf-bench-trace-") as tmp:
        work = bench_project(Path(tmp))
        servers = (start_nats(work / "nats"), start_redis(work / "redis"))
        try:
            found = tracing_cost(servers, work=work, count=args.count, reps=args.reps)
        finally:
            for server in servers:
                server.stop()
    found["machine"] = (
        f"{os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )
    print(json.dumps({k: found[k] for k in ("cpu_us_per_msg", "spread", "ratio")}, indent=1))
    if not args.no_save:
        saved = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        saved.setdefault(args.record, []).append(found)
        RESULTS.write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
