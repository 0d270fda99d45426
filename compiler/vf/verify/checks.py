"""Verify a plan and its objects: the plan schema and the API server's hard limits.

jsonschema-rs decides whether a plan follows its schema (ADR 218); only a plan it refuses
goes to jsonschema, whose verdict is final and whose messages name each problem by its
path in the plan.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from vf.errors import Problem, raise_if
from vf.ir.plan import Plan, plan_to_json
from vf.plan.admission import admission_problems
from vf.resources import schema_path
from vf.textio.patterns import validator as schema_validator
from vf.textio.schema_check import accepts, fast_validator

if TYPE_CHECKING:
    import jsonschema

PLAN_SCHEMA = "plan.v1.schema.json"
CONFIGMAP_MAX_BYTES = 1024 * 1024
OBJECT_MAX_BYTES = 1536 * 1024  # etcd's default request limit


@cache
def plan_schema() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(schema_path(PLAN_SCHEMA).read_text(encoding="utf-8"))
    return document


@cache
def _plan_validator() -> jsonschema.Draft202012Validator:

    found: jsonschema.Draft202012Validator = schema_validator(plan_schema())
    return found


@cache
def plan_fast_validator() -> Any:
    """The plan schema's jsonschema-rs validator (ADR 218)."""
    return fast_validator(plan_schema())


def plan_schema_errors(document: dict[str, Any]) -> list[tuple[str, str]]:
    """Every schema violation of a plan document as (JSON path, message).

    jsonschema-rs decides; only when it refuses the plan does jsonschema see it, to give
    the final verdict and name each problem as jsonschema does.
    """
    if accepts(plan_fast_validator(), document):
        return []
    return [
        ("/".join(map(str, error.absolute_path)), error.message)
        for error in _plan_validator().iter_errors(document)
    ]


def plan_document(plan: Plan) -> tuple[dict[str, Any], list[Problem]]:
    """The plan's JSON form and every way it breaks the plan schema."""
    document = plan_to_json(plan)  # with the collector paused by the compile (vf.collector)
    schema_errors = plan_schema_errors(document)
    problems = [
        Problem(
            code="VF_PLAN_SCHEMA",
            what=f"plan for '{plan.environment}' breaks its schema at "
            f"{path or '(root)'}: {message[:200]}",
            remedy="this is a bug in vf's planner; report it with the graph and vf.yaml",
        )
        for path, message in schema_errors
    ]
    return document, problems


def verify(
    plan: Plan,
    objects: Sequence[dict[str, Any]],
    *,
    found: Sequence[Problem] = (),
    enforce_admission: bool = True,
) -> None:
    """Raise every problem of a plan and its objects at once: ``found`` (the plan's schema
    problems, from ``plan_document``), the API server's limits, and admission rejections
    unless ``enforce_admission`` is False (``vf explain`` shows them instead of failing)."""
    problems = [*found, *_object_limits(plan, objects)]
    if enforce_admission:
        problems.extend(admission_problems(plan.admission, environment=plan.environment))
    raise_if(problems)


def _object_limits(plan: Plan, objects: Sequence[dict[str, Any]]) -> list[Problem]:
    """Names unique per kind, ConfigMaps within 1 MiB, every object within etcd's limit."""
    problems: list[Problem] = []
    seen: dict[tuple[str, str], int] = {}
    for obj in objects:
        key = (str(obj["kind"]), str(obj["metadata"]["name"]))
        seen[key] = seen.get(key, 0) + 1
        size, limit = _object_size(obj)
        if size > limit:
            problems.append(
                Problem(
                    code="VF_K8S_LIMIT",
                    what=f"{key[0]} {key[1]} holds {size} bytes, over the API server's "
                    f"{limit // 1024} KiB limit",
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


def _object_size(obj: dict[str, Any]) -> tuple[int, int]:
    """(bytes, limit): a ConfigMap's data against 1 MiB; anything else, its JSON (an upper
    bound: escapes are never shorter than the UTF-8 they stand for) against etcd's limit."""
    if obj["kind"] == "ConfigMap":
        data = obj.get("data") or {}
        size = sum(len(k) + len(str(v).encode("utf-8", "surrogatepass")) for k, v in data.items())
        return size, CONFIGMAP_MAX_BYTES
    return len(json.dumps(obj, separators=(",", ":"))), OBJECT_MAX_BYTES
