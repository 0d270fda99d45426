"""A change to one environment touches only that environment's files: its overlay, its
plan, its values file and the ConfigMap its Flux HelmRelease reads them from; no file of
another environment, no file every environment reads (the chart's version, values.yaml,
schema and templates), and none of the other environment's objects as the chart renders
them. Measured on both flow types with a replica and a cpu change in dev beside an
unchanged staging."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.graph_sources import NODES
from tests.support import REPO
from vf.pipeline import CompileRequest, compile_project
from vf.tree.write import write_tree

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
gitops:
  repo_url: https://git.example.com/a/b.git
  path: deploy
  flux: {{helm_release: true}}
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
    own = {"plan/dev.json", "chart/values-dev.yaml", "gitops/flux/configmap-dev-values.yaml"}
    if field == "replicas":
        own.add("README.md")
    outside = [p for p in touched if not p.startswith("overlays/dev/") and p not in own]
    assert touched and not outside, outside
    # staging's values, and every file both environments read, stay as they were: the
    # schema and templates (ADR 176, 177, 179, 192, 193), values.yaml (no environment's
    # values) and Chart.yaml's version, which a Flux HelmRelease of staging would upgrade
    # to (ADR 188); dev's values reach its release through its own ConfigMap
    assert {"chart/values-dev.yaml", "gitops/flux/configmap-dev-values.yaml"} <= set(touched)


def _staging(helm: str, tree: Path) -> dict[tuple[str, str], Any]:
    chart = tree / "chart"
    args = ["-n", "churn-staging", "-f", str(chart / "values-staging.yaml")]
    done = subprocess.run(
        [helm, "template", "r", str(chart), *args], capture_output=True, text=True, check=True
    )
    docs = [d for d in YAML(typ="safe").load_all(done.stdout) if d is not None]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


@pytest.mark.parametrize("kind", ["REALTIME", "BATCH"])
@pytest.mark.parametrize(("field", "before", "after"), [("replicas", 1, 2), ("cpu", "1", "2")])
def test_a_change_to_dev_changes_no_object_the_chart_renders_for_staging(
    write_graph: Callable[..., Path],
    tmp_path: Path,
    helm: str,
    kind: str,
    field: str,
    before: object,
    after: object,
) -> None:
    """Compiled over the committed tree, so the chart's version would count on as it does
    in a repository (it does not: nothing every environment reads changed, ADR 188):
    staging's objects stay byte for byte what they were (before ADR 176 the
    version in every object's ``helm.sh/chart`` label changed all of them, so a chart
    delivery of staging saw a change), and staging's planned counts stay in its own values
    file rather than in the schema both environments share."""
    out = tmp_path / "deploy"
    trees, rendered = [], []
    for value in (before, after):
        values = {"replicas": 1, "cpu": "1", field: value}
        graph = write_graph(GRAPH.format(kind=kind), CONFIG.format(**values))
        result = compile_project(CompileRequest(graph=str(graph), out=out, warn=lambda _: None))
        write_tree(out, result.tree)
        trees.append(result.tree)
        rendered.append(_staging(helm, out))
    old, new = trees
    assert old["chart/Chart.yaml"] == new["chart/Chart.yaml"]  # no new version (ADR 188)
    changed = sorted(
        k for k in set(rendered[0]) | set(rendered[1]) if rendered[0].get(k) != rendered[1].get(k)
    )
    count = f"{len(changed)} of {len(rendered[1])}"
    print(f"{kind}, dev {field} {before} -> {after}: staging objects changed {count}")
    assert rendered[0] and not changed, changed
    if kind == "BATCH" and field == "replicas":  # a Job's planned count: dev's own values
        assert "plannedReplicas" in new["chart/values-dev.yaml"]
        assert not _constant_counts(json.loads(new["chart/values.schema.json"]))


def _constant_counts(schema: Any) -> list[Any]:
    """Every number the schema pins with ``const`` (a planned count written into the file
    both environments read); a ``const`` on a word, say a profile's, is not one."""
    if isinstance(schema, dict):
        own = [schema["const"]] if isinstance(schema.get("const"), int) else []
        return own + [c for value in schema.values() for c in _constant_counts(value)]
    if isinstance(schema, list):
        return [c for value in schema for c in _constant_counts(value)]
    return []


@pytest.mark.parametrize(
    ("example", "line", "namespace"),
    [
        ("batch_pipeline", "      double: {}\n", "pipelines"),
        ("realtime_cameras", "      detector: {}\n", "cameras"),
    ],
)
def test_a_dev_replica_count_in_an_example_leaves_every_prod_file_and_object(
    tmp_path: Path, helm: str, example: str, line: str, namespace: str
) -> None:
    """The batch example's dev `double` 1 -> 2 (prod runs 3): before ADR 176 and 177 it
    rewrote values-prod.yaml, the schema and the row templates, and relabeled all 19 prod
    objects. The cameras example's dev `detector` 1 -> 2 (prod runs 4): before ADR 192 it
    renamed dev's provision Job template (its name carries the topology's digest). Before
    ADR 188 it also rewrote values.yaml (the first environment's values) and Chart.yaml's
    version, which every environment's Flux HelmRelease upgrades to. Now the chart changes
    only dev's values."""
    source = tmp_path / "src"
    shutil.copytree(REPO / "examples" / example, source)
    config = source / "vf.yaml"
    text = config.read_text(encoding="utf-8")
    assert line.format(1) in text
    out = tmp_path / "deploy"
    trees, prod = [], []
    for edit in (text, text.replace(line.format(1), line.format(2), 1)):
        config.write_text(edit, encoding="utf-8")
        request = CompileRequest(graph=str(source / "graph.py"), out=out, warn=lambda _: None)
        result = compile_project(request)
        write_tree(out, result.tree)
        trees.append(result.tree)
        chart = out / "chart"
        args = ["-n", namespace, "-f", str(chart / "values-prod.yaml")]
        done = subprocess.run(
            [helm, "template", "r", str(chart), *args], capture_output=True, text=True, check=True
        )
        prod.append(done.stdout)
    old, new = trees
    touched = sorted(p for p in set(old) | set(new) if old.get(p) != new.get(p))
    chart_files = [p for p in touched if p.startswith("chart/")]
    print(f"{example}, dev 1 -> 2: {len(touched)} files, chart: {chart_files}")
    assert chart_files == ["chart/values-dev.yaml"]
    assert not [p for p in touched if "prod" in p]
    assert prod[0] == prod[1]
