"""What the role modules share: the record of a family of role templates, which
``vf.emit.helm.roles`` keeps a table of, the JSON Schema (draft-07) shapes their values
sections are checked with, and the marker of the release's namespace."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vf.ir.plan import Plan
from vf.textio.objects import Obj

# a name in the environment's namespace names the release's: the template puts the
# release's namespace in place of this text (a plain replace, nothing evaluated)
RELEASE_NAMESPACE = "{{ .Release.Namespace }}"


@dataclass(frozen=True, kw_only=True)
class Family:
    """One family of role templates (``templates/helm/roles/<file>``)."""

    files: tuple[str, ...]
    sections: tuple[str, ...]  # its sections, empty in values.yaml (no environment's)
    owns: Callable[[Obj], bool]  # an object of the overlays its templates render
    values: Callable[[Plan], Obj]  # its sections of one environment, from the plan
    schemas: Callable[[Obj], Obj]  # theirs, given what keys a section by the flow's nodes
    # the kind of each object its templates render from one environment's values, with a
    # key that is the same in every environment for what is one object of the chart
    objects: Callable[[Mapping[str, Any]], Iterable[tuple[str, str]]]


def in_release(namespace: str, value: str) -> str:
    """``value`` with a Service of ``namespace`` named in the release's namespace."""
    own = f".{namespace}.svc"
    return value.replace(own, f".{RELEASE_NAMESPACE}.svc") if own in value else value


def strict(*required: str, **properties: Obj) -> Obj:
    """An object of ``properties`` alone (another key is a typo), ``required`` of them
    there."""
    out: Obj = {"type": "object", "additionalProperties": False}
    if required:
        out["required"] = list(required)
    out["properties"] = properties
    return out


def nullable(schema: Obj) -> Obj:
    """``schema`` or null, which turns it off (``--set x=null``, which Helm validates
    before it drops the key)."""
    return {**schema, "type": [schema["type"], "null"]}


def map_of(each: Obj, *, keys: Mapping[str, Any] | None = None, about: str = "") -> Obj:
    """An object whose every entry is ``each``; ``keys`` limits their names."""
    out: Obj = {"type": "object", **(keys or {}), "additionalProperties": each}
    if about:
        out["description"] = about
    return out


def integer(minimum: int = 0, maximum: int | None = None) -> Obj:
    out: Obj = {"type": "integer", "minimum": minimum}
    if maximum is not None:
        out["maximum"] = maximum
    return out


def array(items: Obj | None = None) -> Obj:
    return {"type": "array"} if items is None else {"type": "array", "items": items}


def described(schema: Obj, about: str) -> Obj:
    return {**schema, "description": about}


NAME: Obj = {"type": "string", "minLength": 1}
STRING: Obj = {"type": "string"}
BOOLEAN: Obj = {"type": "boolean"}
OBJECT: Obj = {"type": "object"}
STRINGS = map_of(STRING)  # labels, annotations, variables
OBJECTS = array(OBJECT)  # rules, env entries, volumes: as Kubernetes takes them
QUANTITIES = map_of({"type": ["string", "number"]})
RESOURCES = strict(limits=QUANTITIES, requests=QUANTITIES)
NODE_NAMES_REF = "#/definitions/nodeName"


def node_names(nodes: Sequence[str]) -> Obj:
    """The schema's definitions: the flow's node names, once (each section refers to them)."""
    return {"nodeName": {"enum": sorted(nodes)}} if nodes else {}


def keyed_by_node(nodes: Sequence[str]) -> Obj:
    """What makes a section's schema take entries of the flow's nodes only."""
    # (an enum may not be empty: a chart of no nodes takes no entry)
    return {"propertyNames": {"$ref": NODE_NAMES_REF}} if nodes else {"maxProperties": 0}
