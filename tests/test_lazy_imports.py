"""What a compile loads: the stages a project does not use stay unimported (ADR 0135).

Each case runs ``vf compile --check`` in a fresh interpreter and reads back which modules it
imported, so a top-level import that drags an unused stage back in fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.graph_sources import NODES

GRAPH = (
    NODES
    + """

def build_flow():
    work = Work(name="work", DEVICE)(Src(name="src"))
    return Flow([Sink(name="sink")(work)], flow_type=BATCH)
"""
)
CONFIG = "environments:\n  dev:\n    images: {default: r.io/a:1}\n"
GITOPS = "gitops:\n  repo_url: https://git.example.com/flows.git\n  path: deploy\n  argocd: {}\n"
# Runs the vf command in this process, then prints the modules it loaded.
PROBE = """
import json, sys
from vf.cli import cli
try:
    cli.main(prog_name="vf", args=sys.argv[1:])
except SystemExit as done:
    code = done.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""
# shutil is not among them: Jinja2, which renders every compile's templates (ADR 0172),
# imports it (jinja2.bccache -> tempfile -> shutil).
ON_DEMAND = (
    "vf.plan.gpu.planner",
    "vf.emit.gitops.manifests",
    "ctypes",
    "difflib",
    "traceback",
    "logging",
    "http.server",  # the worker's health server: about 2 MiB of a compile's RSS, 20 ms
)


def _loaded(graph: Path, out: Path) -> tuple[int, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "compile", str(graph), "--out", str(out), "--check"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["code"], set(report["modules"])


def _compiled(write_graph: Callable[..., Path], device: str, config: str) -> tuple[Path, Path]:
    graph = write_graph(GRAPH.replace("DEVICE", device), config)
    out = graph.parent / "deploy"
    written = subprocess.run(
        [sys.executable, "-m", "vf", "compile", str(graph), "--out", str(out)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert written.returncode == 0, written.stderr
    return graph, out


@pytest.mark.slow
def test_a_cpu_flow_without_gitops_loads_neither_stage(write_graph: Callable[..., Path]) -> None:
    graph, out = _compiled(write_graph, "nb_tasks=1", CONFIG)
    code, modules = _loaded(graph, out)
    assert code == 0
    assert modules.isdisjoint(ON_DEMAND), sorted(modules.intersection(ON_DEMAND))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("device", "config", "stage"),
    [
        ("device_type=GPU, gpu_count=1", CONFIG, "vf.plan.gpu.planner"),
        ("nb_tasks=1", CONFIG + GITOPS, "vf.emit.gitops.manifests"),
    ],
)
def test_a_flow_that_uses_a_stage_loads_it(
    device: str, config: str, stage: str, write_graph: Callable[..., Path]
) -> None:
    graph, out = _compiled(write_graph, device, config)
    code, modules = _loaded(graph, out)
    assert code == 0
    assert stage in modules


WAITING_GRAPH = (
    NODES
    + """
import time
from pathlib import Path


def build_flow():
    go = Path(__file__).with_name("go")
    deadline = time.monotonic() + 20
    while not go.exists():  # the caller creates it only once graph_loader has returned
        if time.monotonic() > deadline:
            raise RuntimeError("the caller never ran while the graph was building")
        time.sleep(0.01)
    return Flow([Sink(name="sink")(Src(name="src"))], flow_type=BATCH)
"""
)


def test_the_caller_runs_while_its_graph_builds(write_graph: Callable[..., Path]) -> None:
    from vf.frontend.isolate import graph_loader

    graph = write_graph(WAITING_GRAPH)
    with graph_loader(str(graph)) as loaded:
        (graph.parent / "go").write_text("", encoding="utf-8")
        built, path = loaded()
    assert path == graph.resolve()
    assert [node.name for node in built.nodes] == ["src", "sink"]
