"""The pods of one render share their equal parts (ADR 198), and nothing after the render
changes a rendered object: with parts shared, one change would show in every pod."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.support import EXAMPLE_NAMES
from vf.pipeline import CompileResult
from vf.render.objects import render_plan
from vf.render.shared import with_shared_labels, with_shared_parts


def _job(node: str, **container: Any) -> dict[str, Any]:
    labels = {"vf.dev/node": node}
    return {
        "kind": "Job",
        "metadata": {"name": node, "labels": dict(labels)},
        "spec": {
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "securityContext": {"runAsNonRoot": True},
                    "containers": [
                        {
                            "name": "worker",
                            "env": [
                                {"name": "VF_NODE_NAME", "value": node},
                                {"name": "VF_RUN_ID", "value": "r1"},
                            ],
                            **container,
                        }
                    ],
                },
            }
        },
    }


def _pod(obj: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = obj["spec"]["template"]["spec"]
    return pod


def test_equal_parts_are_one_object_and_the_objects_stay_equal() -> None:
    a, b = (
        _job("a", resources={"requests": {"cpu": "1"}}),
        _job("b", resources={"requests": {"cpu": "1"}}),
    )
    before = copy.deepcopy([a, b])
    table: dict[Any, Any] = {}
    shared = [with_shared_labels(with_shared_parts(obj, table=table)) for obj in (a, b)]
    assert shared == before
    pa, pb = _pod(shared[0]), _pod(shared[1])
    assert pa["securityContext"] is pb["securityContext"]
    ca, cb = pa["containers"][0], pb["containers"][0]
    assert ca["resources"] is cb["resources"]
    assert ca["env"][1] is cb["env"][1]  # VF_RUN_ID=r1 in both
    assert ca["env"][0] is not cb["env"][0]  # each node's own name
    assert ca is not cb and ca["env"] is not cb["env"]  # each pod's own containers and list
    for obj in shared:  # a workload's labels are its pods' where they are equal
        assert obj["spec"]["template"]["metadata"]["labels"] is obj["metadata"]["labels"]


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ({"replicas": 1}, {"replicas": True}),  # equal in Python, not in YAML
        ({"cpu": "1", "memory": "1Gi"}, {"memory": "1Gi", "cpu": "1"}),  # another order
        ({"x": [1]}, {"x": [1.0]}),
    ],
)
def test_parts_equal_in_python_but_written_apart_stay_apart(
    one: dict[str, Any], other: dict[str, Any]
) -> None:
    table: dict[Any, Any] = {}
    a = with_shared_parts(_job("a", resources=one), table=table)
    b = with_shared_parts(_job("b", resources=other), table=table)
    ra, rb = _pod(a)["containers"][0]["resources"], _pod(b)["containers"][0]["resources"]
    assert ra is not rb
    assert json.dumps(rb) == json.dumps(other)


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_no_stage_after_the_render_changes_a_rendered_object(
    example: str, compiled_examples: dict[str, CompileResult]
) -> None:
    """The objects a compile rendered, after every emitter read them, equal the plan
    rendered anew: no emitter changed a part the pods share."""
    result = compiled_examples[example]
    for plan in result.plans:
        assert result.objects[plan.environment] == render_plan(plan), plan.environment
