"""Start-up and memory: the first item of a 10-node ``vf run-local``, an idle worker's RSS,
and ``vf compile --check`` of a 50-node project with three environments.

*First item.* ``vf run-local GRAPH`` of producer → 8 identity processors → consumer, as a
user types it (vf starts its embedded NATS and Redis): seconds from the command's start
to the consumer's first item. videoflow's figure is its local engine on the same chain
(``Flow.run`` with ``LocalProcessEngine``), its servers already running, from the start
of its driver process.

*Idle worker.* The resident set (``VmRSS``) of each worker of a run whose producer waits
between items, read from ``/proc`` once the workers settle.

*--check.* Median wall and CPU time of ``vf compile GRAPH --out DIR --check`` on the
compile benchmark's 50-node shape with three environments, the tree already current.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CHAIN = """
import os
from bench_nodes import Identity, Sink, Source
from vf import BATCH, Flow

def build_flow():
    node = Source(count=int(os.environ["S_COUNT"]), size=64, rate=float(os.environ["S_RATE"]),
                  name="source")
    for depth in range(8):
        node = Identity(name=f"hop{depth}")(node)
    return Flow([Sink(path=os.environ["S_OUT"], name="sink")(node)], flow_type=BATCH,
                flow_id=os.environ["S_FLOW"])
"""
# a payload store, as vf init's project has: vf run-local starts Redis only for one
CONFIG = (
    "environments:\n  bench:\n    images:\n      default: bench:0\n"
    "    payload_store:\n      profile: dev\n"
)
CHECK_CONFIG = "flow_id: peerbench\nenvironments:\n" + "".join(
    f"  {env}:\n    namespace: peerbench-{env}\n"
    "    images: {default: registry.example.com/vf-worker:bench}\n"
    for env in ("dev", "staging", "prod")
)


def _first_line(path: Path, deadline: float) -> list[float] | None:
    while time.monotonic() < deadline:
        if path.exists():
            line = path.read_text().split("\n", 1)[0]
            if line:
                found: list[float] = json.loads(line)
                return found
        time.sleep(0.005)
    return None


def _chain_env(work: Path, name: str, *, count: int, rate: float) -> tuple[dict[str, str], Path]:
    out = work / f"{name}.jsonl"
    out.unlink(missing_ok=True)
    env = {**os.environ, "S_COUNT": str(count), "S_RATE": str(rate), "S_OUT": str(out)}
    env["S_FLOW"] = name
    env["PYTHONPATH"] = str(work)
    return env, out


def first_item(vf: str, work: Path, *, rep: int) -> float:
    """Seconds from ``vf run-local`` starting to the consumer's first item."""
    (work / "chain.py").write_text(CHAIN)
    (work / "vf.yaml").write_text(CONFIG)
    env, out = _chain_env(work, f"first{rep}", count=20, rate=0.0)
    started_wall = time.time()
    proc = subprocess.Popen(
        [vf, "run-local", str(work / "chain.py")],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    record = _first_line(out, time.monotonic() + 60)
    proc.wait(timeout=120)
    if record is None or proc.returncode != 0:
        raise SystemExit(f"vf run-local of the 10-node chain failed ({proc.returncode})")
    return record[2] - started_wall


def peer_first_item(python: str, driver: Path, work: Path, spec: dict[str, Any]) -> float:
    """Seconds from videoflow's driver starting to its consumer's first item."""
    out = Path(spec["out"])
    out.unlink(missing_ok=True)
    started_wall = time.time()
    proc = subprocess.Popen(
        [python, str(driver), json.dumps(spec)],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    record = _first_line(out, time.monotonic() + 60)
    proc.wait(timeout=300)
    if record is None or proc.returncode != 0:
        raise SystemExit(f"videoflow's 10-node chain failed ({proc.returncode})")
    return float(record[2]) - started_wall


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found + [grand for child in found for grand in _children(child)]


def _worker_rss(pid: int) -> tuple[str, float] | None:
    """A worker's node and resident MiB. A fresh worker's environment names its node; one
    forked by run-local's zygote shows the zygote's environment and command line in /proc
    (they are fixed at exec), so it is named by its pid instead."""
    proc = Path("/proc") / str(pid)
    try:
        environ = (proc / "environ").read_bytes().split(b"\0")
        status = (proc / "status").read_text()
        parent = int(status.split("PPid:", 1)[1].split()[0])
        forked = _is_zygote(parent)
    except (OSError, IndexError, ValueError):
        return None
    names = [e.split(b"=", 1)[1].decode() for e in environ if e.startswith(b"VF_NODE_NAME=")]
    names = names or ([f"forked-{pid}"] if forked else [])
    rss = [int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")]
    return (names[0], rss[0] / 1024) if names and rss else None


def _is_zygote(pid: int) -> bool:
    return b"vf_runtime.local.zygote" in (Path("/proc") / str(pid) / "cmdline").read_bytes()


def idle_rss(vf: str, work: Path) -> dict[str, float]:
    """MiB resident per worker of a run whose producer sends one item every 2 s."""
    env, _ = _chain_env(work, "idle", count=5, rate=0.5)
    proc = subprocess.Popen(
        [vf, "run-local", str(work / "chain.py")],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(6.0)
    found: dict[str, float] = {}
    for child in _children(proc.pid):
        worker = _worker_rss(child)
        if worker is not None:
            found[worker[0]] = max(found.get(worker[0], 0.0), worker[1])
    proc.wait(timeout=120)
    return found


def compile_check(vf: str, graph: Path, *, repeat: int) -> dict[str, Any]:
    """``vf compile --check`` of a project given three environments, its tree current."""
    project = graph.parent
    (project / "vf.yaml").write_text(CHECK_CONFIG)
    out = project / "deploy"
    subprocess.run(
        [vf, "compile", "graph.py", "--out", str(out)],
        cwd=project,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    walls, cpus = [], []
    for _ in range(repeat):
        started = time.perf_counter()
        child = subprocess.Popen(
            [vf, "compile", "graph.py", "--out", str(out), "--check"],
            cwd=project,
            stdout=subprocess.DEVNULL,
        )
        _, status, usage = os.wait4(child.pid, 0)
        walls.append(time.perf_counter() - started)
        cpus.append(usage.ru_utime + usage.ru_stime)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit("vf compile --check found the fresh tree stale")
    return {
        "wall_s": walls,
        "cpu_s": cpus,
        "wall_median_s": statistics.median(walls),
        "cpu_median_s": statistics.median(cpus),
    }


if __name__ == "__main__":
    print("run through bench/runtime.py", file=sys.stderr)
