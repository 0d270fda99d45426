"""What a compile remembers lives in its own memo: nothing keyed on its texts outlives it."""

from __future__ import annotations

import functools
import sys
from typing import Any

from tests.support import example_graph
from vf.memo import CompileMemo, compiling, current
from vf.pipeline import CompileRequest, compile_project
from vf.textio import yamlout

DOCUMENT = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "a", "labels": {"app": "on", "tier": "a b"}},
    "data": {"x": "on", "y": "0755", "z": ["on", "a b", {"on": "yes"}]},
}


# Tables keyed on what does not depend on a compile: they fill once per process.
COMPILE_INDEPENDENT = {
    "vf.ir.plan._FORMS",  # the JSON field names of each Plan record class
    "vf.plan.gpu.mig.placement()",  # a card layout per multiset of the shipped MIG profiles
}


def _module_tables() -> dict[str, int]:
    """The size of every container and function cache a vf module holds at its top level."""
    sizes: dict[str, int] = {}
    for name, module in list(sys.modules.items()):
        if name != "vf" and not name.startswith("vf."):
            continue
        for attr, value in list(vars(module).items()):
            if attr.startswith("__"):
                continue
            if isinstance(value, dict | list | set):
                sizes[f"{name}.{attr}"] = len(value)
            elif isinstance(value, functools._lru_cache_wrapper) and value.__module__ == name:
                sizes[f"{name}.{attr}()"] = value.cache_info().currsize
    return sizes


def test_a_compile_leaves_no_table_behind() -> None:
    compile_project(CompileRequest(graph=example_graph("batch_pipeline")))  # shipped data read
    before = _module_tables()
    for example in ("realtime_cameras", "video_analytics", "thumbnails"):
        compile_project(CompileRequest(graph=example_graph(example)))
    after = _module_tables()
    grown = {
        key: (before[key], size)
        for key, size in after.items()
        if key in before and size > before[key] and key not in COMPILE_INDEPENDENT
    }
    assert not grown, f"module-level tables grew with another flow's compile: {grown}"


def test_the_yaml_writer_remembers_only_inside_a_compile() -> None:
    outside = yamlout.dump(DOCUMENT)
    with compiling() as memo:
        assert current() is memo
        inside = [yamlout.dump(DOCUMENT) for _ in range(2)]
        assert memo.yaml_scalars and memo.yaml_heads
    assert inside == [outside, outside]
    assert current() is not memo and not current().yaml_scalars


def test_a_compile_inside_another_gets_its_own_memo() -> None:
    with compiling() as outer:
        yamlout.dump(DOCUMENT)
        with compiling() as inner:
            assert current() is inner and not inner.yaml_scalars
        assert current() is outer


def test_outside_a_compile_each_call_gets_a_fresh_memo() -> None:
    first: Any = current()
    assert isinstance(first, CompileMemo) and current() is not first
