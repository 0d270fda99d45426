"""The runtime benchmark's table in ``docs/performance.md``, from ``bench/results/runtime.json``.

Every figure is a median over the run's repetitions with its spread (min-max) where there
were several; ratios are taken within one repetition, so the machine's load at that moment
cancels out.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
START, END = "<!-- runtime-table:start -->", "<!-- runtime-table:end -->"


def _spread(values: list[float], fmt: str = ".2f") -> str:
    if not values:
        return "—"
    median = statistics.median(values)
    if len(values) == 1:
        return f"{median:{fmt}}"
    return f"{median:{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def _runs(result: dict[str, Any], key: str) -> list[float]:
    return [float(r[key]) for r in result["runs"] if key in r]


def _v4_spread(
    tput: dict[str, Any], value: Callable[[dict[str, Any]], float], fmt: str = ".2f"
) -> str:
    """``_spread`` over the runs that measured the raw loop carrying the v4 envelope."""
    return _spread([value(r) for r in tput["runs"] if "raw_v4_cpu_us_per_msg" in r], fmt)


def _throughput_rows(result: dict[str, Any]) -> list[tuple[str, ...]]:
    tput = result["throughput"]
    cpu = tput["median"]["vf_cpu_us_per_msg"]
    chain_cpu = tput["median"]["raw_chain_cpu_us_per_msg"]
    peer = _runs(tput, "videoflow_msgs_s")
    return [
        (
            "1 KiB items/s: vf flow / raw 3-process chain",
            _spread(_runs(tput, "vf_msgs_s"), ".0f"),
            _spread(_runs(tput, "raw_chain_msgs_s"), ".0f"),
            _spread(_runs(tput, "ratio_vs_chain")),
            _spread(peer, ".0f"),
            "≥ 0.8",
        ),
        (
            "1 KiB items/s: vf flow / raw pipelined loop (one process, one hop)",
            _spread(_runs(tput, "vf_msgs_s"), ".0f"),
            _spread(_runs(tput, "raw_pipelined_msgs_s"), ".0f"),
            _spread(_runs(tput, "ratio_vs_pipelined")),
            "",
            "",
        ),
        (
            "1 KiB items/s: vf / videoflow",
            "",
            "",
            _spread(_runs(tput, "ratio_vs_videoflow")),
            "",
            "",
        ),
        (
            "CPU µs per item: vf identity hop / raw single-process loop",
            _spread([r["vf_cpu_us_per_msg"]["hop0"] for r in tput["runs"]], ".0f"),
            _spread(_runs(tput, "raw_cpu_us_per_msg"), ".0f"),
            _spread(
                [r["vf_cpu_us_per_msg"]["hop0"] / r["raw_cpu_us_per_msg"] for r in tput["runs"]]
            ),
            "",
            "≤ 1.0",
        ),
        (
            "CPU µs per item: vf identity hop / raw loop carrying the v4 envelope (vf's codec)",
            _spread([r["vf_cpu_us_per_msg"]["hop0"] for r in tput["runs"]], ".0f"),
            _v4_spread(tput, lambda r: r["raw_v4_cpu_us_per_msg"], ".0f"),
            _v4_spread(tput, lambda r: r["vf_cpu_us_per_msg"]["hop0"] / r["raw_v4_cpu_us_per_msg"]),
            "",
            "≤ 1.0",
        ),
        (
            "CPU µs per item: vf source / hop / sink; raw chain publisher / relay / reader",
            " / ".join(f"{cpu.get(k, float('nan')):.0f}" for k in ("source", "hop0", "sink")),
            " / ".join(f"{chain_cpu[k]:.0f}" for k in ("publisher", "relay", "reader")),
            "",
            "",
            "",
        ),
    ]


def _latency_rows(result: dict[str, Any]) -> list[tuple[str, ...]]:
    chain = result["hop_latency"]
    depths = chain["median_ms_by_depth"]
    theirs = chain.get("videoflow_median_ms_by_depth", {})
    peer_slope = chain.get("videoflow_per_hop_ms")
    return [
        (
            "Per-hop latency at 50 items/s (ms, slope over depth 1-8)",
            f"{chain['per_hop_ms']:.2f}",
            "",
            "",
            f"{peer_slope:.2f}" if peer_slope is not None else "—",
            "≤ 1.0",
        ),
        (
            "Median end-to-end ms at depth 1 / 2 / 4 / 8",
            " / ".join(f"{depths[d]:.1f}" for d in sorted(depths, key=int)),
            "",
            "",
            " / ".join(f"{theirs[d]:.1f}" for d in sorted(theirs, key=int)) or "—",
            "",
        ),
        *_wake_rows(result),
    ]


def _wake_rows(result: dict[str, Any]) -> list[tuple[str, ...]]:
    """The machine's charge for waking: one item's codec step after 0 / 2 / 20 ms asleep."""
    rows: list[tuple[str, ...]] = []
    for key, when in (("wake_us_before", "before"), ("wake_us_after", "after")):
        found = result.get(key)
        if found:
            naps = sorted(found, key=int)
            steps = " / ".join(f"{found[nap]:.0f}" for nap in naps)
            label = f"Codec step µs after {' / '.join(naps)} ms asleep ({when} the latency runs)"
            rows.append((label, steps, "", "", "", ""))
    return rows


def _other_rows(result: dict[str, Any]) -> list[tuple[str, ...]]:
    blob, sleep, cpu = result["blob"], result["scaling"]["sleep"], result["scaling"]["cpu"]

    def per(found: dict[str, float]) -> str:
        return " / ".join(f"{found[r]:.0f}" for r in sorted(found, key=int)) or "—"

    return [
        (
            "1 MiB payload path MiB/s: vf / raw SET+GET",
            f"{blob['vf_mib_s']:.0f}",
            f"{blob['raw_mib_s']:.0f}",
            _spread(blob.get("ratios", [blob["ratio"]])),
            "",
            "",
        ),
        (
            "20 ms sleeping stage, items/s at 1 / 2 / 4 replicas",
            per(sleep["msgs_s"]),
            "",
            "",
            per(sleep.get("videoflow_msgs_s", {})),
            "",
        ),
        (
            "20 ms CPU-bound stage, items/s at 1 / 2 / 4 replicas",
            per(cpu["msgs_s"]),
            "",
            "",
            "",
            "",
        ),
    ]


def _frame_rows(result: dict[str, Any]) -> list[tuple[str, ...]]:
    found = result.get("frames")
    if not found:
        return []
    copies = found["codec_copies"]
    return [
        (
            "1080p bgr8 frames/s, 3 stages: vf / raw Redis + NATS pointer loop",
            _spread(_runs(found, "vf_frames_s"), ".1f"),
            _spread(_runs(found, "raw_frames_s"), ".1f"),
            _spread(_runs(found, "ratio")),
            "",
            "≥ 0.8",
        ),
        (
            "Frame latency ms: unpaced (queueing included); vf paced at 10 frames/s",
            f"{_spread(_runs(found, 'vf_latency_ms'), '.0f')}; {found['paced_latency_ms']:.0f}",
            _spread(_runs(found, "raw_latency_ms"), ".0f"),
            "",
            "",
            "",
        ),
        (
            "Copies of a frame in the codec: encode / decode",
            f"{copies['encode']:.1f} / {copies['decode']:.1f}",
            "",
            "",
            "",
            "≤ 1 / ≤ 1",
        ),
    ]


def _startup_rows(result: dict[str, Any]) -> list[tuple[str, ...]]:
    found = result.get("startup")
    if not found:
        return []
    rss = found["idle_rss_mib"]
    check = found["check_50_nodes_3_envs"]
    return [
        (
            "10-node run-local: seconds to the first consumed item",
            _spread(found["first_item_s"]),
            "",
            "",
            _spread(found["videoflow_first_item_s"]),
            "≤ 1.5",
        ),
        (
            "Idle worker RSS, MiB (largest of " + str(len(rss)) + " workers)",
            f"{max(rss.values()):.1f}" if rss else "—",
            "",
            "",
            "",
            "≤ 32",
        ),
        (
            "vf compile --check, 50 nodes, 3 environments: wall s (CPU s)",
            f"{_spread(check['wall_s'], '.3f')} ({statistics.median(check['cpu_s']):.3f})",
            "",
            "",
            "",
            "≤ 0.3",
        ),
    ]


def table(saved: dict[str, Any]) -> str:
    result = saved.get("after") or saved.get("before") or {}
    if not result:
        return "(no runtime results saved)"
    rows = [
        *_throughput_rows(result),
        *_latency_rows(result),
        *_other_rows(result),
        *_frame_rows(result),
        *_startup_rows(result),
    ]
    lines = [
        "| Measurement | vf | baseline | vf / baseline | videoflow | goal |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += ["| " + " | ".join(cell or "" for cell in row) + " |" for row in rows]
    reps = result["throughput"]["reps"]
    lines += [
        "",
        f"Medians of {reps} alternating repetitions, spread (min-max) in brackets. "
        f"Machine: {result['machine']}. {result.get('peer', 'videoflow skipped')}.",
    ]
    return "\n".join(lines)


def write_doc(text: str) -> None:
    doc = DOC.read_text(encoding="utf-8")
    block = f"{START}\n{text}\n{END}"
    if START in doc and END in doc:
        head, rest = doc.split(START, 1)
        doc = head + block + rest.split(END, 1)[1]
    else:
        doc = doc.rstrip("\n") + "\n\n## Runtime throughput and latency\n\n" + block + "\n"
    DOC.write_text(doc, encoding="utf-8")
