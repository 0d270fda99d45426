"""The plan check agrees with jsonschema: the same verdict on valid and broken plans.

``verify`` lets jsonschema-rs decide and hands a plan it refuses to jsonschema (ADR 218).
These tests mutate real plans anywhere, record 0 or record 7 alike, and require the
check's verdict to equal jsonschema's on the whole document and jsonschema-rs never to
accept what jsonschema refuses, both on whole plans and record by record on values chosen
to sit on each keyword's edge; and they hold ``json_text`` (the plan file's text) to
``json.dumps`` byte for byte.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any

import jsonschema
import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import example_graph
from vf.ir.plan import plan_to_json
from vf.pipeline import CompileResult
from vf.textio.jsontext import json_chunks, json_text
from vf.textio.schema_check import accepts
from vf.verify.checks import plan_fast_validator, plan_schema, plan_schema_errors

# The plan's repeated records: where each array sits and the schema its items follow.
RECORD_ARRAYS = (
    (("workloads",), "#/$defs/workload"),
    (("channels",), "#/$defs/channel"),
    (("admission", "requests"), "#/$defs/admission/properties/requests/items"),
    (("admission", "findings"), "#/$defs/admission/properties/findings/items"),
    (("gpu", "grants"), "#/$defs/gpu/properties/grants/items"),
)

edge_values = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, -1, 2, 5, 6, 63, 64, 1.0, 1.5, -0.0, 2**70]),
    st.floats(allow_nan=False),
    st.sampled_from(
        [
            "",
            "a",
            "A",
            "a-",
            "-a",
            "a" * 63,
            "a" * 64,
            "VF_X",
            "vf_x",
            "0123456789abcdef",
            "0123456789abcdeF",
            "vf.a.b.c",
            "vf.a.b",
            "x._eos",
            "vf-x",
            "reliable_work",
            "Job",
            "gpu",
            "batch",
            "1.33",
            "dev",
        ]
    ),
    st.text(max_size=12),
    st.lists(st.sampled_from(["a", 1, None]), max_size=2),
    st.dictionaries(st.sampled_from(["a", "VF_A", "known", "unknown"]), st.just("x"), max_size=2),
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.extend(_paths(value, (*prefix, index)))
    return found


@st.composite
def mutated(draw: st.DrawFn, document: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)[1:]))
        parent: Any = doc
        for key in path[:-1]:
            parent = parent[key]
        op = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if op == "replace":
            parent[path[-1]] = draw(edge_values)
        elif op == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif op == "delete":
            parent.pop(path[-1])
        elif isinstance(parent[path[-1]], dict):
            parent[path[-1]][draw(st.sampled_from(["VF_EXTRA", "extra", "bad key"]))] = draw(
                edge_values
            )
    return doc


@pytest.fixture(scope="module")
def plans(compiled_examples: dict[str, CompileResult]) -> list[dict[str, Any]]:
    """Every example's plans, each with more records than the first so both checks run."""
    found = []
    for result in compiled_examples.values():
        for plan in result.plans:
            document = plan_to_json(plan)
            assert len(document["workloads"]) > 1 and len(document["channels"]) > 1
            found.append(document)
    return found


def _full_verdict(document: dict[str, Any]) -> bool:
    return not any(jsonschema.Draft202012Validator(plan_schema()).iter_errors(document))


def test_real_plans_are_valid_both_ways(plans: list[dict[str, Any]]) -> None:
    for document in plans:
        assert accepts(plan_fast_validator(), document)
        assert plan_schema_errors(document) == []
        assert _full_verdict(document)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_plan_check_agrees_with_jsonschema(
    plans: list[dict[str, Any]], data: st.DataObject
) -> None:
    document = data.draw(mutated(data.draw(st.sampled_from(plans))))
    reference = _full_verdict(document)
    if accepts(plan_fast_validator(), document):
        assert reference, "jsonschema-rs accepted a plan jsonschema refuses"
    found = plan_schema_errors(document)
    assert (not found) == reference, found


def test_a_broken_plan_names_each_problem_by_its_path(plans: list[dict[str, Any]]) -> None:
    document = copy.deepcopy(plans[0])
    document["workloads"][1]["replicas"] = "two"
    document["channels"][0]["extra"] = 1
    assert not accepts(plan_fast_validator(), document)
    found = dict(plan_schema_errors(document))
    assert sorted(found) == ["channels/0", "workloads/1/replicas"]
    assert found["workloads/1/replicas"] == "'two' is not of type 'integer'"
    assert "'extra' was unexpected" in found["channels/0"]


@pytest.fixture(scope="module")
def records(plans: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(schema pointer, record) for every repeated record of every example plan."""
    found = []
    for document in plans:
        for path, pointer in RECORD_ARRAYS:
            holder: Any = document
            for key in path:
                holder = holder.get(key) if isinstance(holder, dict) else None
            found.extend((pointer, record) for record in holder or ())
    assert {pointer for pointer, _ in found} >= {"#/$defs/workload", "#/$defs/channel"}
    return found


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_jsonschema_rs_never_accepts_a_record_jsonschema_refuses(
    records: list[tuple[str, dict[str, Any]]], data: st.DataObject
) -> None:
    pointer, original = data.draw(st.sampled_from(records))
    record = data.draw(mutated(original))
    schema = plan_schema()
    sub: Any = schema
    for part in pointer[2:].split("/"):
        sub = sub[part]
    reference = jsonschema.Draft202012Validator(schema).evolve(schema=sub)
    fast = jsonschema_rs.Draft202012Validator({"$defs": schema["$defs"], "$ref": pointer})
    if accepts(fast, record):
        assert not any(reference.iter_errors(record)), record


json_documents = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False),
        st.text(),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=8), inner, max_size=4),
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(document=json_documents)
def test_plan_json_text_is_json_dumps_byte_for_byte(document: Any) -> None:
    expected = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert json_text(document) == expected
    escaped = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=True) + "\n"
    assert json_text(document, ascii=True) == escaped
    assert "".join(json_chunks(document)) == expected
    assert "".join(json_chunks(document, ascii=True)) == escaped


def test_plan_json_text_of_real_plans(plans: list[dict[str, Any]]) -> None:
    for document in plans:
        expected = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        assert json_text(document) == expected
        assert "".join(json_chunks(document)) == expected


def test_a_valid_compile_never_loads_jsonschema() -> None:
    """jsonschema is only imported to explain a problem (ADR 25): start-up stays small."""
    script = (
        "import sys\n"
        "from vf.pipeline import CompileRequest, compile_project\n"
        f"compile_project(CompileRequest(graph={example_graph('batch_pipeline')!r}))\n"
        "assert 'jsonschema' not in sys.modules, 'jsonschema was imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
