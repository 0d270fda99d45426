"""A compile killed with SIGKILL leaves the previous tree or the complete new one, never a mix.

Real ``vf compile`` processes write a tree of a few thousand files over a previous tree and
are killed at random moments: most while their staging directory exists (the write and the
swap), the rest anywhere in the run. After every kill the output directory must equal,
byte for byte, either the tree that was there before or the tree being written; the
user's own file in it survives either way. A last, uninterrupted run must then succeed and
sweep every staging directory the killed runs left behind.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

KILLS = 12
NODES = 560  # about 600 files per tree (one a worker, ADR 183): a write long enough to hit
GRAPH = f'''"""A chain-and-fan graph big enough that writing its tree takes a while."""

from vf import BATCH, Consumer, Flow, Processor, Producer


class Src(Producer):
    def next(self):
        raise StopIteration


class Step(Processor):
    def process(self, item):
        return item


class Sink(Consumer):
    def consume(self, item):
        pass


def build_flow():
    src = Src(name="src")
    lanes = [Step(name=f"l{{j}}-0")(src) for j in range(10)]
    for depth in range(1, {NODES // 10 - 1}):
        lanes = [Step(name=f"l{{j}}-{{depth}}")(lane) for j, lane in enumerate(lanes)]
    return Flow([Sink(name=f"sink-{{j}}")(lane) for j, lane in enumerate(lanes)], flow_type=BATCH)
'''
CONFIG = """flow_id: killtest
environments:
  dev:
    namespace: kill-dev
    images: {{default: registry.example.com/kill/worker:{tag}}}
"""

Snapshot = dict[str, bytes]


CHART = "chart/Chart.yaml"
VERSION = re.compile(rb'^version: "?0\.1\.(\d+)"?$', re.MULTILINE)


def snapshot(root: Path) -> Snapshot:
    """Every file's bytes; the chart's version masked, since it counts the compiles that
    changed the chart (``chart_patch`` reads it)."""
    files = {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }
    files[CHART] = VERSION.sub(b"version: <counted>", files[CHART])
    return files


def chart_patch(root: Path) -> int:
    found = VERSION.search((root / CHART).read_bytes())
    assert found is not None
    return int(found.group(1))


def start(project: Path, tag: str, out: Path) -> subprocess.Popen[bytes]:
    (project / "vf.yaml").write_text(CONFIG.format(tag=tag), encoding="utf-8")
    return subprocess.Popen(
        [sys.executable, "-m", "vf", "compile", str(project / "graph.py"), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )


def wait_for_staging(proc: subprocess.Popen[bytes], staging: Path) -> float:
    """Block until ``proc`` starts writing its staging tree; the moment it did."""
    deadline = time.monotonic() + 120
    while not staging.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.0005)
    return time.monotonic()


def compile_fully(project: Path, tag: str, out: Path) -> tuple[float, float]:
    """Run one compile to the end: (seconds in all, seconds its staging tree existed)."""
    began = time.monotonic()
    proc = start(project, tag, out)
    staging = out.parent / f".{out.name}.vf-new-{proc.pid}"
    writing = wait_for_staging(proc, staging)
    while staging.exists() and proc.poll() is None:
        time.sleep(0.0005)
    staged = time.monotonic() - writing
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    return time.monotonic() - began, staged


def kill_at_random(
    proc: subprocess.Popen[bytes], staging: Path, rng: random.Random, timing: tuple[float, float]
) -> str:
    """Kill ``proc`` at a random moment: mostly while its staging tree exists (or just after)."""
    whole, write = timing
    if rng.random() < 0.25:
        time.sleep(rng.uniform(0.0, whole))
        moment = "anywhere"
    else:
        wait_for_staging(proc, staging)
        time.sleep(rng.uniform(0.0, write))
        moment = "during the write"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    return moment


def test_sigkill_never_leaves_a_mixed_tree(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "graph.py").write_text(GRAPH, encoding="utf-8")
    out = tmp_path / "deploy"
    trees: dict[str, Snapshot] = {}
    timings = []
    for tag in ("1", "2", "1", "2"):
        timings.append(compile_fully(project, tag, out))
        (out / "NOTES.txt").write_text("the user's own file\n", encoding="utf-8")
        trees[tag] = snapshot(out)
    timing = (max(t[0] for t in timings), 1.2 * min(t[1] for t in timings))
    print(f"full compiles (s, staged s): {timings}")
    assert len(trees["1"]) > 500
    changed = [p for p in trees["1"] if trees["1"][p] != trees["2"].get(p)]
    assert len(changed) > 200, "the two trees must differ in many files"
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    outcomes: dict[str, int] = {}
    current, patches = "2", chart_patch(out)
    for _ in range(KILLS):
        target = "1" if current == "2" else "2"
        proc = start(project, target, out)
        moment = kill_at_random(proc, tmp_path / f".deploy.vf-new-{proc.pid}", rng, timing)
        seen, patch = snapshot(out), chart_patch(out)
        assert seen in (trees[current], trees[target]), (
            f"killed {moment}: the tree is neither the previous nor the new one"
        )
        result = "new" if seen == trees[target] and seen != trees[current] else "previous"
        # the new tree's chart counts one more change than the previous one's where its
        # chart differs (one environment's values are not in its version, ADR 188)
        moved = result == "new" and trees[current][CHART] != trees[target][CHART]
        assert patch == patches + moved, (patch, patches, result)
        patches = patch
        outcomes[f"{moment}, {result}"] = outcomes.get(f"{moment}, {result}", 0) + 1
        current = target if result == "new" else current
    print(f"{KILLS} kills: {outcomes}")
    assert outcomes.get("during the write, previous"), "no kill landed before the swap"
    final = "1" if current == "2" else "2"
    compile_fully(project, final, out)
    assert snapshot(out) == trees[final]
    assert not list(tmp_path.glob(".deploy.vf-new-*"))
