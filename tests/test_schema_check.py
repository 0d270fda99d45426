"""The compiled schema checker names each failing value by its JSON path and says why, in
the order jsonschema's keywords are applied: type, then pattern, then length."""

from __future__ import annotations

from typing import Any

from vf.textio.schema_check import compile_schema

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 3},
        "size": {"type": "integer", "minimum": 0},
        "kind": {"enum": ["a", "b", 1]},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"label": {"type": "string", "minLength": 1}},
            },
        },
    },
}


def _errors(document: Any, path: str = "") -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    compile_schema(SCHEMA)(document, path, found)
    return found


def test_a_valid_document_has_no_errors() -> None:
    assert _errors({"name": "abc", "size": 1, "kind": 1, "items": [{"label": "x"}]}) == []


def test_each_failing_value_is_named_by_its_path_below_the_given_one() -> None:
    document = {
        "name": "ABCD",
        "size": -1,
        "kind": "c",
        "items": [{"label": "ok"}, {"label": ""}, {"other": 1}, {"label": 7}],
    }
    assert _errors(document, "plan") == [
        ("plan/name", "'ABCD' does not match '^[a-z]+$'"),
        ("plan/name", "'ABCD' should be between None and 3 characters long"),
        ("plan/size", "-1 is outside [0, None]"),
        ("plan/kind", "'c' is not in ['a', 'b', 1]"),
        ("plan/items/1/label", "'' should be between 1 and None characters long"),
        ("plan/items/2", "additional property 'other' is not allowed"),
        ("plan/items/3/label", "7 is not of type 'string'"),
    ]


def test_a_text_that_fails_its_type_is_not_also_matched_or_measured() -> None:
    assert _errors({"name": 12}) == [("/name", "12 is not of type 'string'")]


def test_an_enum_compares_as_json_does() -> None:
    assert _errors({"name": "a", "kind": True}) == [
        ("/kind", "True is not in ['a', 'b', 1]"),
    ]
    assert _errors({"name": "a", "kind": 1.0}) == []
