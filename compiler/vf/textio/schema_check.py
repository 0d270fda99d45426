"""Fast checkers compiled from a JSON Schema (draft 2020-12): the keywords vf's schemas use.

``jsonschema`` re-walks the schema for every instance, which is most of a large compile's
time when a plan holds thousands of identical records. A checker compiled here walks the
schema once and then costs a few dictionary lookups per value. It implements only the
keywords listed in ``_KEYWORDS`` with jsonschema's semantics (types, bools never numbers,
``pattern`` as a search whose ``$`` is the end of the text) and raises ``ValueError`` at
compile time on any other keyword, so a schema can never grow a rule this checker
silently skips.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from vf.textio.patterns import schema_pattern

Errors = list[tuple[str, str]]
Check = Callable[[Any, str, Errors], None]
# Inside a checker a value's path is its parent's and its key, ``(parent, key)``, made into
# text (``parent/key``) only for a value that fails: most values never need theirs.
Where = Any
Found = list[tuple[Where, str]]
_Inner = Callable[[Any, Where, Found], None]

_ANNOTATIONS = frozenset({"title", "description", "$comment", "$schema", "$id", "$defs", "default"})
_KEYWORDS = frozenset(
    {
        "$ref", "type", "const", "enum", "oneOf", "anyOf", "allOf",
        "pattern", "minLength", "maxLength", "minimum", "maximum",
        "exclusiveMinimum", "exclusiveMaximum",
        "properties", "additionalProperties", "required", "propertyNames",
        "minProperties", "maxProperties", "items", "prefixItems", "minItems", "maxItems",
        "uniqueItems",
    }
)  # fmt: skip


def compile_schema(root: Mapping[str, Any], pointer: str = "#") -> Check:
    """A checker for the subschema of ``root`` at ``pointer`` (``#/$defs/name``)."""
    inner = _Compiler(root).ref(pointer)

    def check(value: Any, path: str, errors: Errors) -> None:
        found: Found = []
        inner(value, path, found)
        errors.extend((_path_text(where), message) for where, message in found)

    return check


def _path_text(where: Where) -> str:
    keys: list[str] = []
    while type(where) is tuple:
        where, key = where
        keys.append(f"/{key}")
    return str(where) + "".join(reversed(keys))


def try_compile(root: Mapping[str, Any], pointer: str = "#") -> Check | None:
    """``compile_schema``, or None where the subschema is missing or uses a keyword this
    module does not implement (the caller then leaves the check to jsonschema)."""
    try:
        return compile_schema(root, pointer)
    except (KeyError, TypeError, ValueError):
        return None


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": _is_integer,
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


def is_type(value: Any, name: str) -> bool:
    """jsonschema's draft 2020-12 type checker: bools are never numbers."""
    if name not in _TYPES:
        raise ValueError(f"unknown JSON Schema type {name!r}")
    return _TYPES[name](value)


def json_equal(one: Any, two: Any) -> bool:
    """Equality as JSON sees it: ``true`` is not ``1``."""
    if isinstance(one, bool) or isinstance(two, bool):
        return type(one) is type(two) and one == two
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(map(json_equal, one, two))
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(json_equal(one[k], two[k]) for k in one)
    return bool(one == two)


def _ok(value: Any, path: Where, errors: Found) -> None:
    """The schema ``true``: every instance is valid."""


class _Compiler:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root
        self.refs: dict[str, _Inner] = {}

    def ref(self, pointer: str) -> _Inner:
        if pointer not in self.refs:
            slot: list[_Inner] = []

            def forward(value: Any, path: Where, errors: Found) -> None:
                slot[0](value, path, errors)  # a recursive schema reaches itself through this

            self.refs[pointer] = forward
            slot.append(self.compile(self._resolve(pointer)))
            self.refs[pointer] = slot[0]
        return self.refs[pointer]

    def _resolve(self, pointer: str) -> Any:
        if pointer != "#" and not pointer.startswith("#/"):
            raise ValueError(f"only local $ref pointers are supported, not {pointer!r}")
        node: Any = self.root
        for part in pointer[2:].split("/") if pointer != "#" else ():
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def compile(self, schema: Any) -> _Inner:
        if schema is True or schema == {}:
            return _ok
        if schema is False:
            return lambda v, p, e: e.append((p, "False schema does not allow it"))
        unknown = set(schema) - _KEYWORDS - _ANNOTATIONS
        if unknown:
            raise ValueError(f"schema keywords not supported by the fast checker: {unknown}")
        if schema.get("type") == "string" and set(schema) - _ANNOTATIONS <= _TEXT_KEYWORDS:
            return _text_check(schema)
        checks = [
            *self._generic(schema),
            *_string_checks(schema),
            *_number_checks(schema),
            *self._object_checks(schema),
            *self._array_checks(schema),
        ]
        if len(checks) <= 1:
            return checks[0] if checks else _ok

        def check_all(value: Any, path: Where, errors: Found) -> None:
            for check in checks:
                check(value, path, errors)

        return check_all

    def _generic(self, schema: Mapping[str, Any]) -> list[_Inner]:
        checks: list[_Inner] = []
        if "$ref" in schema:
            checks.append(self.ref(schema["$ref"]))
        if "type" in schema:
            checks.append(_type_check(schema["type"]))
        if "const" in schema:
            const = schema["const"]
            message = f"was expected to be {const!r}"
            checks.append(_when(lambda v: not json_equal(v, const), message))
        if "enum" in schema:
            choices = list(schema["enum"])
            texts = frozenset(c for c in choices if type(c) is str)  # one lookup for a text
            checks.append(
                _when(
                    lambda v: (
                        not (type(v) is str and v in texts)
                        and not any(json_equal(v, c) for c in choices)
                    ),
                    f"is not in {choices}",
                )
            )
        for keyword in ("oneOf", "anyOf", "allOf"):
            if keyword in schema:
                checks.append(_combinator(keyword, [self.compile(s) for s in schema[keyword]]))
        return checks

    def _object_checks(self, schema: Mapping[str, Any]) -> list[_Inner]:
        keys = {"properties", "additionalProperties", "required", "propertyNames"}
        checks: list[_Inner] = []
        if keys & set(schema):
            checks.append(self._object_check(schema))
        low, high = schema.get("minProperties"), schema.get("maxProperties")
        if low is not None or high is not None:
            checks.append(
                _when(
                    lambda v: isinstance(v, dict) and not _within(len(v), low, high),
                    f"should have between {low} and {high} properties",
                )
            )
        return checks

    def _object_check(self, schema: Mapping[str, Any]) -> _Inner:
        props = {k: self.compile(s) for k, s in schema.get("properties", {}).items()}
        extra_schema = schema.get("additionalProperties", True)
        extra = None if extra_schema is False else self.compile(extra_schema)
        required = tuple(schema.get("required", ()))
        names = self.compile(schema["propertyNames"]) if "propertyNames" in schema else None

        def check_object(value: Any, path: Where, errors: Found) -> None:
            if not isinstance(value, dict):
                return
            for key in required:
                if key not in value:
                    errors.append((path, f"{key!r} is a required property"))
            for key, item in value.items():
                if names is not None:
                    names(key, path, errors)
                check = props.get(key, extra)
                if check is None:
                    errors.append((path, f"additional property {key!r} is not allowed"))
                elif check is not _ok:
                    check(item, (path, key), errors)

        return check_object

    def _array_checks(self, schema: Mapping[str, Any]) -> list[_Inner]:
        checks: list[_Inner] = []
        if "items" in schema or "prefixItems" in schema:
            prefix = [self.compile(s) for s in schema.get("prefixItems", ())]
            rest = self.compile(schema.get("items", True))

            def check_items(value: Any, path: Where, errors: Found) -> None:
                if isinstance(value, list):
                    for index, item in enumerate(value):
                        check = prefix[index] if index < len(prefix) else rest
                        check(item, (path, index), errors)

            checks.append(check_items)
        low, high = schema.get("minItems"), schema.get("maxItems")
        if low is not None or high is not None:
            checks.append(
                _when(
                    lambda v: isinstance(v, list) and not _within(len(v), low, high),
                    f"should have between {low} and {high} items",
                )
            )
        if schema.get("uniqueItems") is True:
            checks.append(_when(lambda v: isinstance(v, list) and _repeats(v), "has repeats"))
        return checks


def _repeats(items: list[Any]) -> bool:
    """Whether two items are equal as JSON values (``uniqueItems``)."""
    return any(json_equal(a, b) for i, a in enumerate(items) for b in items[i + 1 :])


def _within(size: float, low: float | None, high: float | None) -> bool:
    return (low is None or size >= low) and (high is None or size <= high)


def _when(fails: Callable[[Any], bool], message: str) -> _Inner:
    def check(value: Any, path: Where, errors: Found) -> None:
        if fails(value):
            errors.append((path, f"{value!r:.80} {message}"))

    return check


def _type_check(spec: str | list[str]) -> _Inner:
    names = (spec,) if isinstance(spec, str) else tuple(spec)
    for name in names:
        is_type(None, name)  # refuses an unknown type name now, not on the first instance
    tests = [_TYPES[n] for n in names]
    if len(names) == 1 and names[0] in _PLAIN_TYPES:
        return _instance_check(_PLAIN_TYPES[names[0]], f"is not of type {names[0]!r}")
    if len(tests) == 1:
        test = tests[0]
        return _when(lambda v: not test(v), f"is not of type {names[0]!r}")
    return _when(lambda v: not any(t(v) for t in tests), f"is not of type {names}")


# Types whose test is one isinstance (a bool is an int, but no bool is a str, dict or list).
_PLAIN_TYPES: dict[str, type] = {"string": str, "object": dict, "array": list, "boolean": bool}


def _instance_check(kind: type, message: str) -> _Inner:
    """``type`` as one isinstance call per value: the commonest check of a plan."""

    def check(value: Any, path: Where, errors: Found) -> None:
        if not isinstance(value, kind):
            errors.append((path, f"{value!r:.80} {message}"))

    return check


def _combinator(keyword: str, subs: list[_Inner]) -> _Inner:
    def matches(value: Any) -> int:
        count = 0
        for sub in subs:
            found: Found = []
            sub(value, "", found)
            count += not found
        return count

    wanted: dict[str, Callable[[int], bool]] = {
        "oneOf": lambda n: n == 1,
        "anyOf": lambda n: n >= 1,
        "allOf": lambda n: n == len(subs),
    }
    ok = wanted[keyword]
    return _when(lambda v: not ok(matches(v)), f"does not match {keyword}")


_TEXT_KEYWORDS = frozenset({"type", "pattern", "minLength", "maxLength"})


def _text_check(schema: Mapping[str, Any]) -> _Inner:
    """``type: string`` with its pattern and length as one call: what ``compile`` makes of
    them as three checks, in the same order and with the same messages."""
    search = schema_pattern(schema["pattern"]).search if "pattern" in schema else None
    unmatched = f"does not match {schema.get('pattern')!r}"
    low, high = schema.get("minLength"), schema.get("maxLength")
    sized = low is not None or high is not None
    length = f"should be between {low} and {high} characters long"

    def check(value: Any, path: Where, errors: Found) -> None:
        if not isinstance(value, str):
            errors.append((path, f"{value!r:.80} is not of type 'string'"))
            return
        if search is not None and not search(value):
            errors.append((path, f"{value!r:.80} {unmatched}"))
        if sized and not _within(len(value), low, high):
            errors.append((path, f"{value!r:.80} {length}"))

    return check


def _string_checks(schema: Mapping[str, Any]) -> list[_Inner]:
    checks: list[_Inner] = []
    if "pattern" in schema:
        search = schema_pattern(schema["pattern"]).search
        message = f"does not match {schema['pattern']!r}"
        checks.append(_when(lambda v: isinstance(v, str) and not search(v), message))
    low, high = schema.get("minLength"), schema.get("maxLength")
    if low is not None or high is not None:
        checks.append(
            _when(
                lambda v: isinstance(v, str) and not _within(len(v), low, high),
                f"should be between {low} and {high} characters long",
            )
        )
    return checks


def _number_checks(schema: Mapping[str, Any]) -> list[_Inner]:
    checks: list[_Inner] = []
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None or high is not None:
        checks.append(
            _when(
                lambda v: is_type(v, "number") and not _within(v, low, high),
                f"is outside [{low}, {high}]",
            )
        )
    above, below = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if above is not None or below is not None:
        checks.append(
            _when(
                lambda v: (
                    is_type(v, "number")
                    and not ((above is None or v > above) and (below is None or v < below))
                ),
                f"is outside ({above}, {below})",
            )
        )
    return checks
