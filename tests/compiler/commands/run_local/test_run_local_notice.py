"""vf run-local says what a pod has that its local processes do not."""

from __future__ import annotations

from dataclasses import replace

from tests.support import example_graph
from vf.commands.run_local.notices import not_applied
from vf.ir.plan import ContainerResources
from vf.pipeline import CompileRequest, compile_project


def test_the_notice_names_the_plans_memory_limits_and_the_read_only_root() -> None:
    plan = compile_project(CompileRequest(graph=example_graph("batch_pipeline"))).plans[0]
    first = replace(plan.workloads[0], resources=ContainerResources(memory_limit="300Mi"))
    limited = replace(plan, workloads=(first, *plan.workloads[1:]))
    said = not_applied(limited)
    assert said.startswith("[vf] local processes: memory limits (300Mi")
    assert "read-only root" in said and "--runtime podman" in said
    unlimited = replace(
        plan, workloads=tuple(replace(w, resources=ContainerResources()) for w in plan.workloads)
    )
    assert "memory limits" not in not_applied(unlimited)
