"""Every Job of vf ignores pod disruptions (a drain, a preemption, an eviction) in its
backoffLimit through a podFailurePolicy, at every target version that has one, and a Job
that gains the (immutable) field gets a new name (ADR 80, ADR 201)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from tests.graph_sources import NODES
from vf.pipeline import CompileRequest, compile_project

Obj = dict[str, Any]
GRAPH = (
    NODES
    + """

def build_flow():
    work = Work(name="work", nb_tasks=2)(Src(name="src"))
    return Flow([Sink(name="sink")(work)], flow_type={kind}, flow_id="jobs")
"""
)
CONFIG = """environments:
  dev:
    images: {{default: r.io/a:1}}
    kubernetes_version: "{version}"
"""
# every minor vf accepts with a podFailurePolicy that kubernetes-validate has a schema for
VERSIONS = tuple(f"1.{minor}" for minor in range(26, 38))
RULE = {"action": "Ignore", "onPodConditions": [{"status": "True", "type": "DisruptionTarget"}]}


def _jobs(write: Callable[..., Path], *, kind: str, version: str) -> list[Obj]:
    graph = write(GRAPH.format(kind=kind), CONFIG.format(version=version))
    objects = compile_project(CompileRequest(graph=str(graph))).objects["dev"]
    return [o for o in objects if o["kind"] == "Job"]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_job_ignores_disruptions_and_validates(
    write_graph: Callable[..., Path], version: str
) -> None:
    seen = set()
    for kind in ("BATCH", "REALTIME"):
        jobs = _jobs(write_graph, kind=kind, version=version)
        for job in jobs:
            assert job["spec"]["podFailurePolicy"] == {"rules": [RULE]}, job["metadata"]["name"]
            # the API server allows a podFailurePolicy only with restartPolicy Never
            assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
            kubernetes_validate.validate(job, version, strict=True)
            seen.add(job["metadata"]["labels"].get("vf.dev/node", "provision"))
    assert seen == {"provision", "src", "work", "sink"}  # BATCH workers, a finite producer


def test_before_1_26_no_job_has_one_and_gaining_it_renames_every_job(
    write_graph: Callable[..., Path],
) -> None:
    """At 1.25 the field is alpha and off: the API server would drop it. Going to 1.26 adds
    the immutable field, so every Job must get a new name, not meet ``field is
    immutable``."""
    for kind in ("BATCH", "REALTIME"):
        old = _jobs(write_graph, kind=kind, version="1.25")
        new = _jobs(write_graph, kind=kind, version="1.26")
        assert old and all("podFailurePolicy" not in j["spec"] for j in old)
        assert len(old) == len(new)
        assert not {j["metadata"]["name"] for j in old} & {j["metadata"]["name"] for j in new}
