"""Verify a plan and its objects: the plan schema and the API server's hard limits."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from typing import Any

import jsonschema

from vf.admission import admission_problems
from vf.errors import Problem, raise_if
from vf.planir import Plan, plan_to_json
from vf.resources import schema_path

PLAN_SCHEMA = "plan.v1.schema.json"
CONFIGMAP_MAX_BYTES = 1024 * 1024
OBJECT_MAX_BYTES = 1536 * 1024  # etcd's default request limit


@cache
def _plan_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(schema_path(PLAN_SCHEMA).read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def verify(
    plan: Plan, objects: Sequence[dict[str, Any]], *, enforce_admission: bool = True
) -> dict[str, Any]:
    """Return the plan's JSON form after checking it and its objects; raise on any problem.

    Admission rejections are problems too, unless ``enforce_admission`` is False (``vf
    explain`` shows them instead of failing first).
    """
    document = plan_to_json(plan)
    problems = [
        Problem(
            code="VF_PLAN_SCHEMA",
            what=f"plan for '{plan.environment}' breaks its schema at "
            f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message[:200]}",
            remedy="this is a bug in vf's planner; report it with the graph and vf.yaml",
        )
        for error in _plan_validator().iter_errors(document)
    ]
    problems.extend(_object_limits(plan, objects))
    if enforce_admission:
        problems.extend(admission_problems(plan.admission, environment=plan.environment))
    raise_if(problems)
    return document


def _object_limits(plan: Plan, objects: Sequence[dict[str, Any]]) -> list[Problem]:
    problems: list[Problem] = []
    seen: dict[tuple[str, str], int] = {}
    for obj in objects:
        key = (str(obj["kind"]), str(obj["metadata"]["name"]))
        seen[key] = seen.get(key, 0) + 1
        if obj["kind"] == "ConfigMap":
            size = sum(len(k) + len(v.encode()) for k, v in obj.get("data", {}).items())
            if size > CONFIGMAP_MAX_BYTES:
                problems.append(
                    Problem(
                        code="VF_K8S_LIMIT",
                        what=f"ConfigMap {key[1]} holds {size} bytes, over the 1 MiB limit",
                        remedy="shrink the node's constructor arguments; load large data in open()",
                        where=f"environment '{plan.environment}'",
                    )
                )
    for (kind, name), count in sorted(seen.items()):
        if count > 1:
            problems.append(
                Problem(
                    code="VF_IDENTITY_COLLISION",
                    what=f"{count} {kind} objects are named {name!r} in '{plan.environment}'",
                    remedy="rename the nodes whose names collide after normalising",
                )
            )
    return problems
