"""The verdict of vf's schema checks: jsonschema-rs decides, jsonschema explains (ADR 218).

A plan or ``vf.yaml`` that jsonschema-rs finds valid is valid, and nothing else runs.
Where it refuses a document, or cannot read it (a value JSON has no type for, a string
that is not UTF-8), the caller hands the document to ``jsonschema``, the reference
implementation, whose verdict is final and whose messages, paths and line numbers users
see. jsonschema-rs is the stricter of the two on a few values (a non-finite float is no
number to it, ``\\s`` also matches U+FEFF): those cost the jsonschema pass, never a
different verdict.
"""

from __future__ import annotations

from typing import Any

# The JSON types and their subclasses in a document (ruamel.yaml's round-trip loader gives
# ScalarFloat, ScalarInt and the block-scalar strings); jsonschema-rs reads only the exact
# types, and refuses to read the rest.
_SCALARS: tuple[tuple[type, type], ...] = ((str, str), (int, int), (float, float))


def fast_validator(schema: dict[str, Any]) -> Any:
    """A jsonschema-rs validator of ``schema`` (draft 2020-12), built once per caller."""
    import jsonschema_rs

    return jsonschema_rs.Draft202012Validator(schema)


def accepts(validator: Any, document: Any) -> bool:
    """Whether ``validator`` finds ``document`` valid; False where it cannot read it."""
    try:
        return bool(validator.is_valid(document))
    except ValueError:  # an unsupported type; UnicodeEncodeError for a lone surrogate
        return False


def json_values(document: Any) -> Any:
    """``document`` with each subclass of a JSON type made its plain type (bools kept, and
    any other value left as it is, for jsonschema-rs to refuse to read)."""
    kind = type(document)
    if kind is str or kind is bool or kind is int or kind is float or document is None:
        return document
    if isinstance(document, dict):
        return {json_values(key): json_values(value) for key, value in document.items()}
    if isinstance(document, list):
        return [json_values(item) for item in document]
    for base, plain in _SCALARS:
        if isinstance(document, base) and not isinstance(document, bool):
            return plain(document)
    return document
