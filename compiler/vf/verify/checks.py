"""Verify a plan and its objects: the plan schema and the API server's hard limits.

The plan schema is checked in two parts (ADR 0020): jsonschema validates the plan's
structure with one representative of each repeated record, and a checker compiled from the
same schema's ``$defs`` validates every workload and channel record. The compiled checker
understands only the keywords the schema uses and refuses any other, so a schema change can
never be silently skipped.
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
from vf.textio.schema_check import Check, try_compile

if TYPE_CHECKING:
    import jsonschema

PLAN_SCHEMA = "plan.v1.schema.json"
CONFIGMAP_MAX_BYTES = 1024 * 1024
OBJECT_MAX_BYTES = 1536 * 1024  # etcd's default request limit
# The plan's repeated records: where the array sits and the schema its items follow.
RECORD_ARRAYS = (
    (("workloads",), "#/$defs/workload"),
    (("channels",), "#/$defs/channel"),
    (("admission", "requests"), "#/$defs/admission/properties/requests/items"),
    (("admission", "findings"), "#/$defs/admission/properties/findings/items"),
    (("gpu", "grants"), "#/$defs/gpu/properties/grants/items"),
)


@cache
def plan_schema() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(schema_path(PLAN_SCHEMA).read_text(encoding="utf-8"))
    return document


@cache
def _plan_validator() -> jsonschema.Draft202012Validator:

    found: jsonschema.Draft202012Validator = schema_validator(plan_schema())
    return found


@cache
def _whole_plan_check() -> Check | None:
    """The whole plan schema compiled (ADR 25)."""
    return try_compile(plan_schema())


@cache
def record_checks() -> tuple[tuple[tuple[str, ...], Check], ...]:
    """The compiled checker of each repeated record, with the path of its array.

    A record whose schema cannot be compiled (moved, or using a keyword the compiler does
    not know) is left whole to jsonschema: slower, never weaker.
    """
    schema = plan_schema()
    compiled = ((path, try_compile(schema, pointer)) for path, pointer in RECORD_ARRAYS)
    return tuple((path, check) for path, check in compiled if check is not None)


def plan_schema_errors(document: dict[str, Any]) -> list[tuple[str, str]]:
    """Every schema violation of a plan document as (JSON path, message).

    The compiled checker of the whole schema decides; only when it finds a problem does
    jsonschema see the document (each record array cut to its first record, the compiled
    checkers seeing every other record) to name each problem as jsonschema does.
    """
    check = _whole_plan_check()
    found: list[tuple[str, str]] = []
    if check is not None:
        check(document, "", found)
        if not found:
            return []
    return _explained_errors(document) or found


def _explained_errors(document: dict[str, Any]) -> list[tuple[str, str]]:
    sample = dict(document)
    rest: list[tuple[str, list[Any], Check]] = []
    for path, check in record_checks():
        holder = _cut_holder(sample, path[:-1])
        records = holder.get(path[-1]) if holder is not None else None
        if isinstance(records, list):
            holder[path[-1]] = records[:1]  # type: ignore[index]
            rest.append(("/".join(path), records, check))
    errors = [
        ("/".join(map(str, error.absolute_path)), error.message)
        for error in _plan_validator().iter_errors(sample)
    ]
    for prefix, records, check in rest:
        for index in range(1, len(records)):
            check(records[index], f"{prefix}/{index}", errors)
    return errors


def _cut_holder(sample: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    """The dict at ``path`` inside ``sample``, copied so cutting it leaves the plan intact."""
    holder = sample
    for key in path:
        inner = holder.get(key)
        if not isinstance(inner, dict):
            return None
        holder[key] = inner = dict(inner)
        holder = inner
    return holder


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
