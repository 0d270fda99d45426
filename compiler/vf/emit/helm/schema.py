"""The chart's ``values.schema.json``: strict (unknown keys are typos), ``global`` allowed.

Built from every environment's values: a key is known when some environment has it,
required when every environment sets it to something other than null, and typed by
what the knobs mean (images, pull policy, resources, replicas) or else by the values seen.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from vf.emit.helm.job_values import JOB_VALUES, JOB_VALUES_SCHEMA
from vf.emit.helm.overrides import OVERRIDE_SCHEMAS
from vf.emit.helm.shapes import (
    BOOLEAN,
    NAME,
    NODE_NAMES_REF,
    QUANTITIES,
    array,
    described,
    integer,
    map_of,
    node_names,
    strict,
)
from vf.emit.helm.workers import worker_schemas
from vf.textio.objects import Obj

ValueKey = tuple[str, ...]
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
_TAG = {"type": ["string", "null"], "pattern": "^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"}
_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"))


def values_schema(values: Mapping[str, Obj], *, nodes: Sequence[str] = ()) -> Obj:
    """The JSON Schema (draft-07) every environment's values satisfy. It holds nothing of
    one environment's that another's change could alter: each environment's planned Job and
    partitioned counts are in its own values (``plannedReplicas``), which the chart checks
    (ADR 176). The role templates' sections take entries of ``nodes``."""
    root = _object((), trees=[values[env] for env in sorted(values)])
    # values.yaml names no environment and holds none's values (ADR 188): what every
    # environment sets is required once the values name one; without, the chart's own check
    # refuses to render, naming the values files, which a schema error could not
    required = [k for k in root.pop("required", []) if k != "environment"]
    if required:
        root["if"] = {
            "properties": {"environment": {"type": "string"}},
            "required": ["environment"],
        }
        root["then"] = {"required": required}
    props = root["properties"]
    props["global"] = described(
        {"type": "object"}, "Values a parent chart shares with its subcharts."
    )
    tag = described(
        _TAG,
        "One tag for every image of the flow (workers, provision Job); "
        "renames the Jobs, so an upgrade creates new ones.",
    )
    props["image"] = strict(tag=tag)
    props["environment"] = {
        "enum": [*sorted(values), None],
        "description": "The environment of vf.yaml these values are for: it decides which "
        "objects only some environments have are rendered. values.yaml names none, and the "
        "chart refuses to render without one: install with -f values-<environment>.yaml.",
    }
    props.update({**copy.deepcopy(OVERRIDE_SCHEMAS), **worker_schemas(nodes)})
    _with_node_overrides(props.get("nodes"))
    if "plannedReplicas" in props:
        props["plannedReplicas"] = map_of(
            integer(1),
            about="The environment's planned count of each Job and partitioned "
            "worker (generated): the chart refuses another nodes.<node>.replicas for them; "
            "recompile to change.",
        )
    props[JOB_VALUES] = JOB_VALUES_SCHEMA
    props["enabled"] = described(
        BOOLEAN, "Read by a parent chart's dependency condition; unused here."
    )
    _with_node_names(root, nodes=nodes)
    return {"$schema": DRAFT_07, "title": "vf chart values", **root}


def _with_node_names(root: Obj, *, nodes: Sequence[str]) -> None:
    """The flow's node names once, as a definition the sections that take a node's entry
    refer to (the release-size budget, ADR 194)."""
    definitions = node_names(nodes)
    if not definitions:
        return
    root["definitions"] = definitions
    names = root["properties"].get("nodes", {}).get("propertyNames")
    if names == definitions["nodeName"]:  # the same names: written once
        root["properties"]["nodes"]["propertyNames"] = {"$ref": NODE_NAMES_REF}


def _with_node_overrides(nodes: Obj | None) -> None:
    """Every node's schema takes the pod overrides, each optional."""
    if not nodes:
        return
    each = nodes.get("additionalProperties")
    schemas = [each] if isinstance(each, dict) else []
    schemas += list((nodes.get("properties") or {}).values())
    for schema in schemas:
        props = schema.setdefault("properties", {})
        for name, override in OVERRIDE_SCHEMAS.items():
            props[name] = {k: v for k, v in override.items() if k != "description"}


def _object(prefix: ValueKey, *, trees: Sequence[Any]) -> Obj:
    maps = [t for t in trees if isinstance(t, dict)]
    keys = sorted({k for m in maps for k in m})
    properties = {}
    for key in keys:
        children = [m.get(key) for m in maps]
        properties[key] = _node((*prefix, key), values=children)
    required = [k for k in keys if all(m.get(k) is not None for m in maps)]
    shared = _most_shared(properties) if len(prefix) == 1 and len(properties) > 1 else []
    if len(shared) > 1:
        alike = set(shared)
        odd = {k: v for k, v in properties.items() if k not in alike}
        return _alike(keys, each=properties[shared[0]], odd=odd, required=required)
    schema: Obj = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _most_shared(schemas: Mapping[str, Obj]) -> list[str]:
    """The keys of the largest group of equal schemas (the first such group in key order)."""
    groups: dict[str, list[str]] = {}
    for key, schema in schemas.items():
        groups.setdefault(json.dumps(schema, sort_keys=True), []).append(key)
    return max(groups.values(), key=len)


def _alike(
    keys: Sequence[str], *, each: Obj, odd: Mapping[str, Obj], required: Sequence[str]
) -> Obj:
    """A section whose entries (nodes, say) mostly share one schema: the names once, the
    shared schema once and the odd entries' own (a node with a Job name, say), so the
    schema grows by a name per node instead of a copy per node."""
    schema: Obj = {
        "type": "object",
        "propertyNames": {"enum": list(keys)},
        "additionalProperties": each,
    }
    if odd:
        schema["properties"] = dict(odd)
    if list(required) == list(keys):
        schema["minProperties"] = len(keys)  # with the names fixed: every one is there
    elif required:
        schema["required"] = list(required)
    return schema


def _is_branch(prefix: ValueKey) -> bool:
    """Sections of the values tree (as opposed to values that happen to be maps)."""
    if len(prefix) == 1:
        return prefix[0] in _BRANCHES
    return len(prefix) == 2 and prefix[0] == "nodes"


def _node(prefix: ValueKey, *, values: Sequence[Any]) -> Obj:
    if _is_branch(prefix) and all(isinstance(v, dict) for v in values):
        return _object(prefix, trees=values)
    schema = _leaf(prefix, values=values)
    if any(v is None for v in values):
        return {"anyOf": [schema, {"type": "null"}]}
    return schema


_BRANCHES = ("nodes", "broker", "payloadStore")
_EXACT: dict[ValueKey, Obj] = {
    ("imagePullPolicy",): {
        "enum": ["Always", "IfNotPresent", "Never"],
        "description": "imagePullPolicy of every pod.",
    },
    ("broker", "natsUrl"): described(
        NAME, "The NATS URL(s) workers and the provision Job connect to."
    ),
    ("payloadStore", "url"): described(NAME, "The Redis URL large payloads are offloaded to."),
    ("priorityClassName",): described(NAME, "priorityClassName of every pod."),
}
_BY_LAST: dict[str, Obj] = {
    "image": described(NAME, "Container image (tag or digest)."),
    "resources": described(
        strict(limits=QUANTITIES, requests=QUANTITIES, claims=array()),
        "Container resources (requests, limits) of this worker.",
    ),
    "replicas": described(
        integer(1),
        "Planned replicas. A Deployment's may be set here; a Job's or a "
        "partitioned worker's only through vf.yaml (recompile): its count is part of other "
        "objects.",
    ),
}


def _leaf(prefix: ValueKey, *, values: Sequence[Any]) -> Obj:
    known = _EXACT.get(prefix) or _BY_LAST.get(prefix[-1])
    return dict(known) if known is not None else _observed(values)


def _observed(values: Sequence[Any]) -> Obj:
    types = set()
    for value in values:
        if isinstance(value, dict):
            types.add("object")
        elif isinstance(value, list):
            types.add("array")
        elif value is not None:
            types.add(next(name for kind, name in _JSON_TYPES if isinstance(value, kind)))
    if "integer" in types and "number" in types:
        types.discard("integer")
    ordered = sorted(types)
    if not ordered:
        return {}
    return {"type": ordered[0] if len(ordered) == 1 else ordered}
