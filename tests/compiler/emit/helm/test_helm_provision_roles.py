"""The last objects of the diff path as role templates (ADR 243): the provision Job, the
topology and replica-count ConfigMaps and a partitioned worker's headless Service. Every
flow's chart holds the same templates; a ``--set`` of a count reaches the topology and the
replica-count ConfigMap. Rendered with the real ``helm``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import rendered_by_name
from vf.pipeline import CompileResult
from vf.tree.write import write_tree

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

# rendered by vf for each flow: its name, environments and counts
PER_FLOW = {"chart/templates/NOTES.txt", "chart/templates/environment.yaml"}


def test_every_flows_chart_holds_the_same_templates(
    compiled_examples: dict[str, CompileResult],
) -> None:
    """No template of one object: each file under templates/ is a role's, in every chart."""
    seen: dict[str, set[str]] = {}
    files = set()
    for result in compiled_examples.values():
        mine = {p for p in result.tree if _shipped(p)}
        files.add(frozenset(mine))
        for path in mine:
            seen.setdefault(path, set()).add(str(result.tree[path]))
    assert "chart/templates/provision.yaml" in seen
    assert len(files) == 1, files
    assert all(len(texts) == 1 for texts in seen.values()), sorted(
        p for p, t in seen.items() if len(t) > 1
    )


def _shipped(path: str) -> bool:
    """A template that ships with vf (not one vf writes for the flow)."""
    own = path in PER_FLOW or path.startswith("chart/templates/tests/")
    return path.startswith("chart/templates/") and not own


def _objects(helm: str, chart: Path, *args: str) -> dict[tuple[str, str], Any]:
    return rendered_by_name(helm, chart, "values-dev.yaml", *args, namespace="cams")


def test_a_set_count_reaches_the_topology_and_the_replica_counts(
    compiled_examples: dict[str, CompileResult], tmp_path: Path, helm: str
) -> None:
    write_tree(tmp_path / "deploy", compiled_examples["realtime_cameras"].tree)
    chart = tmp_path / "deploy" / "chart"
    plain = _objects(helm, chart)
    found = _objects(helm, chart, "--set", "nodes.detector.replicas=7")
    topology = found[("ConfigMap", "vf-cameras-rce2b7c1-topology")]["data"]["nodes-000.jsonl"]
    records = {r["name"]: r for r in map(json.loads, topology.splitlines())}
    assert records["detector"]["replicas"] == 7
    before = plain[("ConfigMap", "vf-cameras-rce2b7c1-topology")]["data"]["nodes-000.jsonl"]
    assert {r["name"]: r for r in map(json.loads, before.splitlines())}["archive"] == (
        records["archive"]
    )
    counts = found[("ConfigMap", "vf-cameras-rce2b7c1-replicas")]["data"]
    assert counts["detector"] == "7"
    service = found[("Service", "vf-cameras-rce2b7c1-tracker-hl")]
    assert service["spec"]["clusterIP"] == "None"
    hooks = [o for o in found.values() if o["kind"] == "Job"]
    assert [j["metadata"]["annotations"]["helm.sh/hook"] for j in hooks] == [
        "post-install,post-upgrade"
    ]
