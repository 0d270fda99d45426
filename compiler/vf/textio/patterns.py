"""JSON Schema patterns with their ECMA-262 meaning of ``$``.

In a schema, ``$`` ends the text. In Python's ``re`` it also matches just before a final
newline, so ``^[a-z]+$`` would accept ``"dev\\n"``: a namespace, environment or image with a
trailing newline would pass every validator. Every schema pattern vf checks goes through
``schema_pattern``, which turns each ``$`` outside a character class into ``\\Z``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from typing import Any


def schema_pattern(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled so that ``$`` matches only at the very end of the text (``re``
    keeps the compiled patterns; a compile asks for about fifty)."""
    out: list[str] = []
    escaped = in_class = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            out.append(r"\Z")
            continue
        out.append(char)
    return re.compile("".join(out))


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    import jsonschema

    if validator.is_type(instance, "string") and not schema_pattern(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


@cache
def validator_class() -> Any:
    """Draft 2020-12 ``jsonschema`` validator whose ``pattern`` keyword ends at ``\\Z``."""
    import jsonschema

    extend: Any = jsonschema.validators.extend
    return extend(jsonschema.Draft202012Validator, validators={"pattern": _pattern})


def validator(schema: Any) -> Any:
    """A validator for ``schema`` (see ``validator_class``)."""
    return validator_class()(schema)
