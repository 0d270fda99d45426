"""``schemas/plan.v1.schema.json`` says what the Plan IR says, record for record.

The schema is written by hand (it carries descriptions, patterns and bounds the
dataclasses cannot), so this test holds the two together: every record of the Plan IR
(``vf.ir.plan.Plan`` and every dataclass it reaches) has an object in the schema with
exactly its fields as properties (an observation, Known or Unknown, has a JSON form of
its own and is left out), every field but the omitted-when-None ones required, and
no other property allowed. A field added to, renamed in or removed from the IR fails here
until the schema says the same; a change to the Literal sets of the IR fails until the
schema's enums match.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import fields, is_dataclass
from typing import Any

import pytest

from tests.support import REPO
from vf.ir.capabilities import Unknown
from vf.ir.plan import Plan

SCHEMA = REPO / "schemas" / "plan.v1.schema.json"
HOW = "edit schemas/plan.v1.schema.json to match the dataclass in compiler/vf/ir/"


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = root["$defs"][node["$ref"].removeprefix("#/$defs/")]
    return node


def _branches(node: dict[str, Any], root: dict[str, Any]) -> list[dict[str, Any]]:
    """The non-null alternatives of a schema node."""
    node = _resolve(node, root)
    options = node.get("oneOf") or node.get("anyOf")
    if options is None:
        return [node]
    found = []
    for option in options:
        resolved = _resolve(option, root)
        if resolved.get("type") != "null":
            found.extend(_branches(resolved, root))
    return found


def _strip_none(hint: Any) -> list[Any]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return [h for h in typing.get_args(hint) if h is not type(None)]
    return [hint]


def _pairs(record: type, root: dict[str, Any]) -> list[tuple[type, dict[str, Any], str]]:
    """(record, schema node, place) for ``record`` and every record below it."""
    found: list[tuple[type, dict[str, Any], str]] = []
    stack: list[tuple[type, dict[str, Any], str]] = [(record, root, "Plan")]
    seen: set[tuple[type, int]] = set()
    while stack:
        current, node, place = stack.pop()
        if (current, id(node)) in seen:
            continue
        seen.add((current, id(node)))
        found.append((current, node, place))
        hints = typing.get_type_hints(current)
        for f in fields(current):
            if f.metadata.get("json") == "object" or f.name not in node.get("properties", {}):
                continue
            stack.extend(_children(hints[f.name], node["properties"][f.name], root, place, f.name))
    return found


def _children(
    hint: Any, node: dict[str, Any], root: dict[str, Any], place: str, name: str
) -> list[tuple[type, dict[str, Any], str]]:
    found = []
    for option in _strip_none(hint):
        nodes, record = _branches(node, root), option
        if typing.get_origin(option) is tuple:
            record, nodes = typing.get_args(option)[0], [_resolve(b["items"], root) for b in nodes]
        if is_dataclass(record) and isinstance(record, type) and record is not Unknown:
            found += [(record, n, f"{place}.{name}") for n in nodes if n.get("type") == "object"]
    return found


def _literals(hint: Any) -> set[Any] | None:
    """The values a Literal field takes, None among them when the field is optional."""
    for option in _strip_none(hint):
        if typing.get_origin(option) is typing.Literal:
            union = typing.get_origin(hint) in (typing.Union, types.UnionType)
            optional = union and type(None) in typing.get_args(hint)
            return set(typing.get_args(option)) | ({None} if optional else set())
    return None


def _enum_nodes(node: dict[str, Any], root: dict[str, Any]) -> list[dict[str, Any]]:
    node = _resolve(node, root)
    options = node.get("oneOf") or node.get("anyOf")
    if options is None:
        return [node] if "enum" in node else [{"enum": [None]}]
    return [n for o in options for n in _enum_nodes(o, root)]


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(SCHEMA.read_text(encoding="utf-8"))
    return document


def test_every_plan_record_has_its_fields_and_only_them_in_the_schema(
    schema: dict[str, Any],
) -> None:
    pairs = _pairs(Plan, schema)
    print(f"{len(pairs)} records of the Plan IR checked against the schema")
    assert len(pairs) > 10, "the walk lost the Plan's records"
    for record, node, place in pairs:
        names = {f.name for f in fields(record)}
        required = {f.name for f in fields(record) if f.metadata.get("json") != "omit-if-none"}
        assert set(node.get("properties", {})) == names, (
            f"{place} ({record.__name__}): schema {sorted(node.get('properties', {}))} "
            f"!= fields {sorted(names)}; {HOW}"
        )
        assert set(node.get("required", [])) == required, f"{place}: required differs; {HOW}"
        assert node.get("additionalProperties") is False, f"{place}: allows extra properties"


def test_the_ir_literal_sets_are_the_schema_enums(schema: dict[str, Any]) -> None:
    checked = 0
    for record, node, place in _pairs(Plan, schema):
        hints = typing.get_type_hints(record)
        for f in fields(record):
            allowed = _literals(hints[f.name])
            if allowed is None:
                continue
            enums = {v for b in _enum_nodes(node["properties"][f.name], schema) for v in b["enum"]}
            assert enums == allowed, f"{place}.{f.name}: schema {enums} != IR {allowed}; {HOW}"
            checked += 1
    assert checked >= 3, "no Literal field of the Plan IR was compared"
