"""The fast paths behind names and digests give what the plain forms give."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.support import example_graph
from vf import names
from vf.ir.plan import Workload
from vf.ir.records import PodOptions
from vf.pipeline import CompileRequest, compile_project
from vf.plan.jobs import tag_jobs
from vf.textio.jsontext import compact_json

DNS_1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(st.lists(st.text(alphabet="abz09-_.A \nİ", max_size=20), min_size=1, max_size=3))
@example(["A"])
@example(["Ab"])
@example(["a-"])
@example(["-a"])
@example(["a\n"])
@example(["a" * 64])
@example([""])
def test_a_kubernetes_name_is_kept_exactly_when_it_is_one_already(parts: list[str]) -> None:
    logical = "-".join(parts)
    name = names.k8s_name(*parts)
    if DNS_1123.fullmatch(logical) and len(logical) <= names.K8S_NAME_MAX:
        assert name == logical
    elif logical:
        assert name != logical
        assert DNS_1123.fullmatch(name) and len(name) <= names.K8S_NAME_MAX
    else:
        assert name == ""


@given(JSON, st.booleans())
def test_compact_json_is_json_dumps_sorted_and_compact(value: object, ascii: bool) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii)
    assert compact_json(value, ascii=ascii) == expected


@pytest.mark.parametrize("generation", ["gabc1234", None])
def test_tagging_a_job_changes_its_two_names_and_nothing_else(generation: str | None) -> None:
    graph = example_graph("batch_pipeline")
    plan = compile_project(CompileRequest(graph=graph, environments=("dev",))).plans[0]
    tagged = tag_jobs(
        plan.workloads,
        flow_id="f",
        run_id="r1",
        generation=generation,
        gpu=None,
        pods=plan.pods or PodOptions(),
    )
    assert any(w.kind == "Job" for w in plan.workloads), "the example has Jobs"
    renamed = {"name"}
    for before, after in zip(plan.workloads, tagged, strict=True):
        if before.kind != "Job":
            assert after is before
            continue
        assert type(after) is Workload
        kept = {k: v for k, v in vars(after).items() if k not in renamed}
        assert kept == {k: v for k, v in vars(before).items() if k not in renamed}
        tag = generation or after.name.rpartition("-")[2]
        assert after.name == f"vf-f-r1-{before.node}-{tag}"
        assert after == dataclasses.replace(before, name=after.name)
