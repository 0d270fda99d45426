"""The chart's slot machinery on generated objects: whatever differs between environments
(values, missing keys, list lengths, awkward strings), ``helm template`` gives back each
environment's object exactly.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from vf.emit.helm.chart import ChartInfo, emit_helm
from vf.emit.helm.slots import (
    POD_SPEC,
    find_slots,
    knob_key,
    may_hold_knob,
    string_leaves,
    strings_holding,
)
from vf.pipeline import CompileResult

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

Obj = dict[str, Any]
ENVS = ("blue", "green")
KEYS = st.sampled_from(["a", "b", "c", "on", "yes", "n", "x.y/z", "{{", "k~1"])
SCALARS = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**40),
    st.booleans(),
    st.sampled_from(["", "on", "0755", "1e3", "{{ .Values }}", "a: b", "- x", "é", "{{-", "}}"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=8),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=8,
)


def _object(name: str, data: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "labels": {"vf.dev/flow": "f"}},
        "data": data,
    }


def _render(helm: str, root: Path, tree: dict[str, str], env: str) -> list[Obj]:
    for path, text in tree.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    chart = root / "chart"
    done = subprocess.run(
        [helm, "template", "r", str(chart), "-n", "ns", "-f", str(chart / f"values-{env}.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rendered = [d for d in YAML(typ="safe").load_all(done.stdout) if d is not None]
    for obj in rendered:  # Helm's own labels, which the chart adds to every object
        labels = obj["metadata"]["labels"]
        assert labels.pop("helm.sh/chart") == "prop"
        assert labels.pop("app.kubernetes.io/managed-by") == "Helm"
    return rendered


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    shared=st.dictionaries(KEYS, VALUES, min_size=1, max_size=3),
    blue=st.dictionaries(KEYS, VALUES, max_size=3),
    green=st.dictionaries(KEYS, VALUES, max_size=3),
    only_green=st.booleans(),
)
def test_any_difference_round_trips_through_helm(
    shared: Obj, blue: Obj, green: Obj, only_green: bool, helm: str, tmp_path_factory: Any
) -> None:
    per_env = {
        "blue": [_object("one", {**shared, "spec": blue})],
        "green": [_object("one", {**shared, "spec": green})],
    }
    if only_green:
        per_env["green"].append(_object("two", green))
    info = ChartInfo(
        name="prop",
        flow_type="batch",
        kubernetes_versions=dict.fromkeys(ENVS, "1.33"),
        namespaces=dict.fromkeys(ENVS, "ns"),
        nodes=(),
    )
    tree = emit_helm(per_env, info=info)
    root = tmp_path_factory.mktemp("chart")
    for env in ENVS:
        assert _render(helm, root, tree, env) == per_env[env]


def _paths(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out += _paths(child, (*path, index))
    return out


def test_the_slot_walk_prunes_no_knob(compiled_examples: dict[str, CompileResult]) -> None:
    """``may_hold_knob`` lets the walk skip equal subtrees: it must hold wherever a knob
    lies below, on every object of every example (knob fields absent from an object, like
    an unset priorityClassName, included)."""
    knobs = 0
    for result in compiled_examples.values():
        for objects in result.objects.values():
            for obj in objects:
                extra = [(*POD_SPEC, "priorityClassName"), (*POD_SPEC, "runtimeClassName")]
                for path in [*_paths(obj), *extra]:
                    if knob_key(obj, path=path) is None:
                        continue
                    knobs += 1
                    for depth in range(len(path) + 1):
                        assert may_hold_knob(obj, path=path[:depth]), (obj["kind"], path)
    assert knobs > 50


MARKER_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)


@given(
    data=VALUES,
    head=MARKER_TEXT,
    tail=MARKER_TEXT,
    namespace=st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True),
)
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_the_strings_naming_a_namespace_are_every_string_that_holds_it(
    data: Any, head: str, tail: str, namespace: str
) -> None:
    """The chart finds ``.<namespace>.svc`` with a walk that yields only the strings holding
    it: the same paths, in the same order, as every string's path filtered afterwards."""
    marker = f".{namespace}.svc"
    obj = {"data": data, "env": [{"value": f"{head}{marker}{tail}"}]}
    expected = [(path, text) for path, text in string_leaves(obj) if marker in text]
    assert list(strings_holding(obj, marker)) == expected
    assert expected[-1] == (("env", 0, "value"), f"{head}{marker}{tail}")


def test_an_object_of_one_environment_has_the_slots_of_the_general_walk(
    compiled_examples: dict[str, CompileResult],
) -> None:
    """An object only one environment has (every object of a one-environment flow) is
    walked by a shorter path; its slots are those the general walk finds when the object
    is the same in two environments: its knobs and its missing settable fields."""
    seen = 0
    for result in compiled_examples.values():
        for objects in result.objects.values():
            for obj in objects:
                alone = [(s.path, s.key, s.values["x"]) for s in find_slots({"x": obj})]
                pair = [(s.path, s.key, s.values["x"]) for s in find_slots({"x": obj, "y": obj})]
                assert alone == pair, obj["metadata"]["name"]
                seen += len(alone)
    assert seen > 100
