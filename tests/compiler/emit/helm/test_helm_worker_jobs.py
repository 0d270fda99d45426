"""The worker Jobs' role template (ADR 241): a BATCH node's Job, and a REALTIME flow's
finite producer, are one hand-written template over ``workers.<node>``, ``nodes.<node>``
and ``workerPod``, the same bytes in every flow's chart, as is ``_helpers.tpl``; a value
the Job's pod reads changes what renders and renames every Job. Rendered with the real
``helm`` (and ``kubectl kustomize`` for the overlay it must equal)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helm_release import write_layered
from tests.support import as_overlay, helm_template, kustomize_build, parse_docs
from vf.emit.ordering import without_tool_annotations
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.tree.write import write_tree

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

SAME = ("chart/templates/worker-job.yaml", "chart/templates/_helpers.tpl")


@pytest.fixture(scope="module")
def batch(
    compiled_examples: dict[str, CompileResult], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    root = tmp_path_factory.mktemp("batch") / "deploy"
    write_tree(root, compiled_examples["batch_pipeline"].tree)
    return root / "chart"


def _jobs(helm: str, chart: Path, *args: str) -> dict[str, Any]:
    done = helm_template(helm, chart, "-n", "b", "-f", str(chart / "values-prod.yaml"), *args)
    assert done.returncode == 0, done.stderr
    docs = parse_docs(done.stdout)
    return {
        d["metadata"]["labels"].get("vf.dev/node", "provision"): d
        for d in docs
        if d["kind"] == "Job"
    }


def _env(job: Any) -> dict[str, Any]:
    entries = job["spec"]["template"]["spec"]["containers"][0]["env"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in entries}


def test_every_flows_chart_ships_the_same_job_template_and_helpers(
    compiled_examples: dict[str, CompileResult],
) -> None:
    texts = {path: {str(r.tree[path]) for r in compiled_examples.values()} for path in SAME}
    assert all(len(seen) == 1 for seen in texts.values()), {p: len(t) for p, t in texts.items()}
    tree = compiled_examples["batch_pipeline"].tree
    made = [p for p in tree if p.startswith("chart/templates/") and "job-" in p]
    # no Job has a template of its own, the provision Job neither (ADR 243)
    assert made == [], made


def test_a_jobs_pod_comes_from_its_readable_values_and_renames_every_job(
    batch: Path, helm: str
) -> None:
    plain = _jobs(helm, batch)
    assert _env(plain["merge"])["VF_NODE_CLASS"] == "batch_nodes.Merge"
    tuned = _jobs(helm, batch, "--set", "workers.merge.class=batch_nodes.Other")
    assert _env(tuned["merge"])["VF_NODE_CLASS"] == "batch_nodes.Other"
    # a Job's pod template is immutable: every Job is new, in a new generation
    names = {node: job["metadata"]["name"] for node, job in plain.items()}
    assert not {job["metadata"]["name"] for job in tuned.values()} & set(names.values())
    generations = {
        job["spec"]["template"]["metadata"]["annotations"]["vf.dev/generation"]
        for job in tuned.values()
    }
    assert len(generations) == 1 and generations != {"g93babd5"}, generations


def test_a_job_above_one_replica_is_indexed_and_reads_its_index(batch: Path, helm: str) -> None:
    jobs = _jobs(helm, batch)
    assert jobs["double"]["spec"]["completions"] == jobs["double"]["spec"]["parallelism"] == 3
    assert jobs["double"]["spec"]["completionMode"] == "Indexed"
    assert "VF_REPLICA_ID" in _env(jobs["double"])
    assert "completionMode" not in jobs["record-reader"]["spec"]
    assert "VF_REPLICA_ID" not in _env(jobs["record-reader"])
    assert _env(jobs["merge"])["VF_PARENT_REPLICAS"] == "double=3,triple=2"


def test_a_realtime_flows_finite_producer_is_the_job_the_overlay_holds(
    tmp_path: Path, helm: str, kubectl: str
) -> None:
    graph = write_layered(tmp_path / "rt", nodes=12, prod_image="bench-2", kind="REALTIME")
    result = compile_project(CompileRequest(graph=str(graph)))
    root = tmp_path / "rt" / "deploy"
    write_tree(root, result.tree)
    values = (root / "chart" / "values.yaml").read_text(encoding="utf-8")
    assert "kind: Job" in values  # the producer's entry: a worker of the Job template
    for env in ("dev", "prod"):
        overlay = [
            d
            for d in parse_docs(kustomize_build(kubectl, root / "overlays" / env))
            if d["kind"] == "Job"
        ]
        chart, namespace = root / "chart", overlay[0]["metadata"]["namespace"]
        done = helm_template(helm, chart, "-n", namespace, "-f", str(chart / f"values-{env}.yaml"))
        assert done.returncode == 0, done.stderr
        ours = [d for d in parse_docs(done.stdout) if d["kind"] == "Job"]
        assert len(ours) == len(overlay) == 2  # the producer's and the provision Job
        by_name = {d["metadata"]["name"]: d for d in overlay}
        for job in ours:
            assert as_overlay(job) == without_tool_annotations(by_name[job["metadata"]["name"]])
