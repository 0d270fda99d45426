"""The API server's size limits are checked on every object vf renders: an object whose JSON
passes etcd's limit is refused by name, however near the limit the cheap bound says it is."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from vf.errors import VfError
from vf.pipeline import CompileResult
from vf.verify.checks import OBJECT_MAX_BYTES, verify


def _workload(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] in {"Job", "Deployment", "StatefulSet"})


@pytest.mark.parametrize(
    ("extra", "refused"),
    [
        (OBJECT_MAX_BYTES // 6, False),  # the bound passes it without serialising
        (OBJECT_MAX_BYTES - 8192, False),  # near the limit: only the JSON can tell
        (OBJECT_MAX_BYTES, True),
    ],
)
def test_a_workload_over_etcds_limit_is_refused(
    compiled_examples: dict[str, CompileResult], extra: int, refused: bool
) -> None:
    result = compiled_examples["batch_pipeline"]
    plan = result.plans[0]
    objects = copy.deepcopy(result.objects[plan.environment])
    workload = _workload(objects)
    workload["metadata"].setdefault("annotations", {})["example.com/blob"] = "x" * extra
    if not refused:
        verify(plan, objects)
        return
    with pytest.raises(VfError) as caught:
        verify(plan, objects)
    assert caught.value.code == "VF_K8S_LIMIT"
    assert workload["metadata"]["name"] in str(caught.value)
