"""A change to one environment touches only that environment's files: its overlay and its
plan (and the chart, one artifact for every environment). Measured on both flow types with
a replica change in dev beside an unchanged staging."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.graph_sources import NODES
from vf.pipeline import CompileRequest, compile_project

GRAPH = (
    NODES
    + """

def build_flow():
    work = Work(name="work")(Src(name="src"))
    return Flow([Sink(name="sink")(work)], flow_type={kind}, flow_id="churn")
"""
)
CONFIG = """environments:
  dev:
    namespace: churn-dev
    images: {{default: r.io/a:1}}
    replicas: {{work: {replicas}}}
    resources: {{work: {{cpu: "{cpu}"}}}}
  staging:
    namespace: churn-staging
    images: {{default: r.io/a:1}}
    replicas: {{work: 1}}
    resources: {{work: {{cpu: "1"}}}}
"""


def _group(path: str) -> str:
    parts = path.split("/")
    return "/".join(parts[:2]) if parts[0] == "overlays" else parts[0]


@pytest.mark.parametrize("kind", ["REALTIME", "BATCH"])
@pytest.mark.parametrize(("field", "before", "after"), [("replicas", 1, 2), ("cpu", "1", "2")])
def test_a_change_to_dev_touches_only_devs_files(
    write_graph: Callable[..., Path], kind: str, field: str, before: object, after: object
) -> None:
    trees = []
    for value in (before, after):
        values = {"replicas": 1, "cpu": "1", field: value}
        graph = write_graph(GRAPH.format(kind=kind), CONFIG.format(**values))
        trees.append(compile_project(CompileRequest(graph=str(graph))).tree)
    old, new = trees
    touched = sorted(p for p in set(old) | set(new) if old.get(p) != new.get(p))
    print(
        f"{kind}, dev {field} {before} -> {after}: {len(touched)} files, "
        f"{dict(sorted(Counter(_group(p) for p in touched).items()))}"
    )
    # the tree README's diagram and table show replicas per environment: a replica change
    # is news to its readers; a resource change is not in it
    own = ("plan/dev.json", "README.md") if field == "replicas" else ("plan/dev.json",)
    outside = [p for p in touched if not p.startswith(("overlays/dev/", "chart/")) and p not in own]
    assert touched and not outside
    assert "chart/values-dev.yaml" in touched
