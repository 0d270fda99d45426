"""The chart is assembled from role templates only (ADR 245): an object no role template
renders is refused rather than lost, and every value the chart holds is one a template
reads."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from ruamel.yaml import YAML

from vf.emit.helm.chart import ChartInfo, emit_helm

INFO = ChartInfo(
    name="f",
    flow_type="batch",
    kubernetes_versions={"dev": "1.34"},
    namespaces={"dev": "n"},
    nodes=(),
)
# read by a parent chart, not by this one's templates
_FOR_PARENTS = frozenset({"global", "enabled"})


def test_an_object_no_role_template_renders_is_refused() -> None:
    stray = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}}
    with pytest.raises(AssertionError, match="dev: ConfigMap/c has no role template"):
        emit_helm({"dev": [stray]}, info=INFO)


def test_the_namespace_is_the_releases_and_no_template_of_its_own() -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}
    tree = emit_helm({"dev": [namespace]}, info=INFO)
    assert not [p for p in tree if "namespace" in p.lower()]
    assert "chart/templates/rows" not in {p.rsplit("/", 1)[0] for p in tree}


@pytest.mark.parametrize("example", ["batch_pipeline", "realtime_cameras"])
def test_every_value_the_chart_holds_is_read_by_a_template(
    example: str, compiled_examples: dict[str, Any]
) -> None:
    """values.yaml's, each environment's and the schema's top-level keys: each is read by
    a template of the chart (``.Values.<key>``, ``$v.<key>`` or ``index … "<key>"``)."""
    tree = compiled_examples[example].tree
    text = "".join(t for p, t in tree.items() if p.startswith("chart/templates/"))
    yaml = YAML(typ="safe")
    keys = set(json.loads(tree["chart/values.schema.json"])["properties"])
    for path in (p for p in tree if re.fullmatch(r"chart/values(-[^/]+)?\.yaml", p)):
        keys |= set(yaml.load(tree[path]))
    unread = {
        key
        for key in keys - _FOR_PARENTS
        if not re.search(rf'\.{re.escape(key)}\b|"{re.escape(key)}"', text)
    }
    assert not unread


def test_every_flows_chart_has_the_same_templates(compiled_examples: dict[str, Any]) -> None:
    """A flow's chart differs from another's in Chart.yaml, its README and its values
    (the schema's node and environment names among them), never in a template."""
    texts: dict[str, set[str]] = {}
    for result in compiled_examples.values():
        for path, text in result.tree.items():
            if path.startswith("chart/templates/"):
                texts.setdefault(path, set()).add(str(text))
    assert texts and "chart/templates/NOTES.txt" in texts
    assert {path: len(seen) for path, seen in texts.items() if len(seen) > 1} == {}
