"""Time vf's GPU solver and packer on a large inventory; results go to bench/results/gpu.json.

Shape: 64 nodes x 8 cards (H100 80GB), 400 MIG sharers of mixed sizes plus whole-card
spanners for the mix solver, and the whole-card packer on the same nodes.
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "compiler"), str(ROOT / "runtime")]

from vf.plan.gpu.mig import FAMILIES  # noqa: E402
from vf.plan.gpu.pack import Bin, Pod, pack_whole, solve_mix  # noqa: E402

NODES, CARDS, SHARERS, REPEAT = 64, 8, 400, 5
SIZES = (9.0, 18.0, 35.0)


def _mix_case() -> tuple[list[Pod], list[Pod], list[tuple[str, int, object]]]:
    h100 = next(f for f in FAMILIES if f.name == "H100-80GB")
    nodes = [(f"gpu-{i:02d}", CARDS, h100) for i in range(NODES)]
    sharers = [
        Pod(workload=f"sharer-{i % 20}", replica=i, memory_gib=SIZES[(i % 20) % len(SIZES)])
        for i in range(SHARERS)
    ]
    spanners = [Pod(workload="trainer", replica=i, cards=2) for i in range(32)]
    return spanners, sharers, nodes


def _time(action: object, repeat: int) -> list[float]:
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()  # type: ignore[operator]
        timings.append(time.perf_counter() - start)
    return timings


def main() -> None:
    spanners, sharers, nodes = _mix_case()
    mix = _time(lambda: solve_mix(spanners, sharers, nodes), REPEAT)  # type: ignore[arg-type]
    result = solve_mix(spanners, sharers, nodes)  # type: ignore[arg-type]
    pods = [Pod(workload=f"w{i % 10}", replica=i, cards=1 + i % 4) for i in range(400)]
    bins = [Bin(host=f"gpu-{i:02d}", cards=CARDS) for i in range(NODES)]
    whole = _time(lambda: pack_whole(pods, bins), REPEAT)
    report = {
        "machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version()},
        "shape": {"nodes": NODES, "cards_per_node": CARDS, "sharers": SHARERS, "spanners": 32},
        "mix_solver_seconds_median": round(statistics.median(mix), 4),
        "mix_cards_opened": sum(c.use == "mig" for c in result.cards),
        "mix_failed": result.failed is not None,
        "whole_packer_seconds_median": round(statistics.median(whole), 4),
        "whole_pods": len(pods),
    }
    out = ROOT / "bench" / "results" / "gpu.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
