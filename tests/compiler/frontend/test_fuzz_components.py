"""Property-based fuzzing of component descriptors and params: a node, or a named error.

Descriptors start from a valid one and get random mutations (keys deleted, unknown keys,
values of the wrong type, odd strings and numbers, random params schemas); params are
random JSON-ish values. The property: ``component()`` returns a node, or raises a
``VfError`` with exit code 2 that names a ``VF_COMPONENT_*`` rule; never anything else.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vf.errors import EXIT_USER, VfError
from vf.frontend.components import component
from vf_runtime import Node

BASE: dict[str, Any] = {
    "apiVersion": "vf.dev/component/v1",
    "name": "fuzzed",
    "kind": "processor",
    "image": "registry.example.com/f/fuzzed:1",
    "command": ["run"],
    "ports": [{"name": "metrics", "port": 9000}],
    "params": {"type": "object", "properties": {"n": {"type": "integer"}}},
    "resources": {"cpu": "100m", "gpu": {"count": 1}},
    "runtime": {"localCommand": ["{python}", "x.py"]},
}
KEYS = [*BASE, "finite", "description", "bogus"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["producer", "consumer", "health", "8080", "", "vf.dev/component/v1"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def descriptors(draw: st.DrawFn) -> dict[str, Any]:
    document = copy.deepcopy(BASE)
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        key = draw(st.sampled_from(KEYS))
        if draw(st.booleans()):
            document.pop(key, None)
        else:
            document[key] = draw(values)
    return document


@pytest.mark.slow
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(document=descriptors(), params=values)
def test_a_descriptor_becomes_a_node_or_a_named_error(
    tmp_path: Path, document: dict[str, Any], params: Any
) -> None:
    path = tmp_path / "component.yaml"
    try:
        path.write_text(json.dumps(document), encoding="utf-8")
    except (ValueError, UnicodeEncodeError):
        return  # not writable as JSON text (NaN is fine; lone surrogates are not)
    try:
        node = component(str(path), params=params)
    except VfError as error:
        assert error.exit_code == EXIT_USER
        assert all(p.code.startswith("VF_COMPONENT_") for p in error.problems), error.render()
        assert all(p.remedy for p in error.problems)
    else:
        assert isinstance(node, Node)
