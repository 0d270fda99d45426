"""jsonschema-rs decides vf's schema checks (ADR 218): what it reads, and where it is held
to jsonschema's verdict on the values the two implementations read differently."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest

from tests.support import REPO
from vf.textio.patterns import schema_pattern, validator
from vf.textio.schema_check import accepts, fast_validator, json_values
from vf.textio.yaml_read import reader

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "size": {"type": "integer", "minimum": 0},
        "ratio": {"type": "number"},
        "name": {"type": "string", "pattern": "^[a-z]+$"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}


def test_a_round_trip_loaded_document_is_read_as_plain_json() -> None:
    """ruamel.yaml's scalar subclasses (hex and octal ints, floats, block strings) are
    values jsonschema-rs refuses to read; made plain, they check as jsonschema checks them."""
    text = "size: 0x10\nratio: 1.5\nname: |-\n  abc\ntags: [a, 'b']\n"
    document = reader("rt").load(text)
    assert not accepts(fast_validator(SCHEMA), document)  # cannot read ScalarInt & co
    plain = json_values(document)
    assert plain == {"size": 16, "ratio": 1.5, "name": "abc", "tags": ["a", "b"]}
    assert [type(v) for v in plain.values()] == [int, float, str, list]
    assert accepts(fast_validator(SCHEMA), plain)
    assert not any(validator(SCHEMA).iter_errors(document))


@pytest.mark.parametrize("value", [{"size": True}, {"name": "ab\n"}, {"size": -1}])
def test_bools_are_not_integers_and_dollar_ends_the_text(value: dict[str, Any]) -> None:
    assert not accepts(fast_validator(SCHEMA), value)
    assert any(validator(SCHEMA).iter_errors(value))


@pytest.mark.parametrize(
    "text", ["tags: 2020-01-01", "tags: !!binary aGk=", "tags: !!set {a}", "tags: {1: a}"]
)
def test_a_value_json_has_no_type_for_is_not_accepted(text: str) -> None:
    """jsonschema-rs cannot read it where the schema asks for a type, so the caller asks
    jsonschema (ADR 218), which refuses it too."""
    document = json_values(reader("rt").load(text))
    assert not accepts(fast_validator(SCHEMA), document)
    assert any(validator(SCHEMA).iter_errors(document))


def test_a_lone_surrogate_is_not_accepted() -> None:
    assert not accepts(fast_validator(SCHEMA), {"name": "a\udc80"})


def test_a_non_finite_number_is_refused_by_jsonschema_rs_and_decided_by_jsonschema() -> None:
    """jsonschema-rs reads inf as no number at all: stricter, so jsonschema decides."""
    assert not accepts(fast_validator(SCHEMA), {"ratio": math.inf})
    assert not any(validator(SCHEMA).iter_errors({"ratio": math.inf}))


def _whitespace_patterns() -> list[str]:
    found = []
    for name in ("vf.config.v1.schema.json", "plan.v1.schema.json", "component.v1.schema.json"):
        text = (REPO / "schemas" / name).read_text(encoding="utf-8")
        found.extend(json.loads(p) for p in re.findall(r'"pattern": ("[^"]*\\\\[sS][^"]*")', text))
    return found


def test_no_whitespace_class_in_a_schema_pattern_is_read_apart() -> None:
    """ECMA-262's \\s (jsonschema-rs) lacks U+001C-U+001F and U+0085, which Python's
    (jsonschema, through ``schema_pattern``) has, and has U+FEFF, which Python's lacks. vf's
    patterns name those five in their classes: jsonschema-rs then refuses every
    character jsonschema refuses, and U+FEFF only costs the jsonschema pass."""
    patterns = _whitespace_patterns()
    assert len(patterns) == 6
    for pattern in patterns:
        assert "\\x1c-\\x1f\\x85" in pattern, pattern
        fast = fast_validator({"type": "string", "pattern": pattern})
        reference = schema_pattern(pattern)
        (sample,) = [s for s in ("a", "https://a", "nats://a") if reference.search(s)][:1]
        assert accepts(fast, sample)
        texts = {code: sample + chr(code) for code in range(0x10000) if not 0xD800 <= code < 0xE000}
        python_refuses = {code for code, text in texts.items() if not reference.search(text)}
        rust_refuses = {code for code, text in texts.items() if not accepts(fast, text)}
        assert rust_refuses - python_refuses == {0xFEFF}, pattern
        assert python_refuses <= rust_refuses, pattern
