"""Canonical YAML for Kubernetes objects: the one place vf turns data into YAML text.

Block style, no anchors, no line wrapping, LF, one trailing newline; top-level keys
``apiVersion, kind, metadata`` first and every other mapping sorted. A string is
written plain only when it cannot be read back as anything but that string under
YAML 1.1 or 1.2 (so ``on``, ``yes``, ``0755`` and ``1e3`` stay strings for kubectl);
otherwise it is double-quoted with escapes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from vf.memo import current

_FIRST_KEYS = ("apiVersion", "kind", "metadata")
_PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./@=+ -]*(:[A-Za-z0-9_./@=+-]+)*$")
_RESERVED = frozenset(
    {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf", "~", "="}
)
_NUMBERISH = re.compile(r"^[-+]?(\.?[0-9]|\.(inf|nan)$)", re.IGNORECASE)
# Keys and common values repeat across thousands of objects; long, unique strings do not.
# A compile remembers the text of short ones (``CompileMemo.yaml_scalars``), at most this
# many: a bound on what one large compile spends on them.
_RENDERED_MAX = 1 << 16
_RENDERED_LEN = 64
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def scalar(value: Any) -> str:
    """One YAML scalar, safe to read back as the same value."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot write {value!r} to YAML")
        text = repr(value)
        if "e" in text and "." not in text:  # YAML 1.1 floats need a dot in the mantissa
            mantissa, _, exponent = text.partition("e")
            text = f"{mantissa}.0e{exponent}"
        return text
    if isinstance(value, str):
        return _plain_or_quoted(value)
    raise TypeError(f"cannot write {type(value).__name__} to YAML")


def _is_plain(text: str) -> bool:
    return (
        bool(_PLAIN.fullmatch(text))
        and text.lower() not in _RESERVED
        and not _NUMBERISH.match(text)
        and not text.endswith((":", " "))
        and " #" not in text
    )


def quote(text: str) -> str:
    """A double-quoted YAML scalar; everything outside printable ASCII is escaped."""
    if text.isascii():
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        if not escaped.isprintable():  # line breaks and tabs (a topology's lines): at C speed
            escaped = escaped.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
        if escaped.isprintable():  # nothing left for ``\x..``: what the table below writes
            return '"' + escaped + '"'
    escaped = text.translate(_BYTE_ESCAPES)
    if not escaped.isascii():
        escaped = _WIDE.sub(_wide_escape, escaped)
    return '"' + escaped + '"'


# ``\x..`` for every character up to U+00FF that is not printable ASCII, but the short
# escapes; ``\u....`` / ``\U........`` beyond (see ``_wide_escape``).
_BYTE_ESCAPES = {
    code: _ESCAPES.get(chr(code), f"\\x{code:02x}")
    for code in range(0x100)
    if not 0x20 <= code < 0x7F or chr(code) in _ESCAPES
}
_WIDE = re.compile("[^\x00-\xff]")


def _wide_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _plain_or_quoted(text: str) -> str:
    return text if _is_plain(text) else quote(text)


def _text(text: str, scalars: dict[str, str]) -> str:
    """A string scalar, remembered in ``scalars``: keys and label values repeat across
    thousands of objects."""
    rendered = scalars.get(text)
    if rendered is None:
        rendered = _plain_or_quoted(text)
        if len(scalars) < _RENDERED_MAX and len(text) <= _RENDERED_LEN:
            scalars[text] = rendered
    return rendered


def _keys(mapping: Mapping[str, Any], top: bool) -> list[str]:
    if not top:
        return sorted(mapping)
    first = [k for k in _FIRST_KEYS if k in mapping]
    return first + sorted(k for k in mapping if k not in _FIRST_KEYS)


def _inline(value: Any, scalars: dict[str, str]) -> str:
    """A value written on its own line's end: a scalar, or an empty ``{}`` / ``[]``."""
    if type(value) is str:
        return _text(value, scalars)
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, list | tuple):
        return "[]"
    return scalar(value)


# A compile also remembers ``indent + key + ":"`` of each string key met at each indent
# (``CompileMemo.yaml_heads``): keys repeat in every object.
_Heads = dict[str, dict[str, str]]


def _mapping(
    mapping: Mapping[str, Any],
    indent: str,
    out: list[str],
    keys: list[str],
    memo: tuple[dict[str, str], _Heads],
) -> None:
    """Append the block lines of a non-empty mapping; sequences under a key are not indented.
    ``memo``: the compile's scalars and heads."""
    cache, child = memo[0], indent + "  "
    heads = memo[1].get(indent)
    if heads is None:
        heads = memo[1][indent] = {}
    for key in keys:
        value = mapping[key]
        head = heads.get(key) if type(key) is str else None
        if head is None:
            head = f"{indent}{_text(key, cache) if type(key) is str else scalar(key)}:"
            if type(key) is str and len(key) <= _RENDERED_LEN and len(heads) < _RENDERED_MAX:
                heads[key] = head
        kind = type(value)
        if kind is str:
            out.append(f"{head} {cache.get(value) or _text(value, cache)}")
        elif kind is dict and value:
            out.append(head)
            _mapping(value, child, out, sorted(value), memo)
        elif kind is int:  # the commoner scalars, before the abstract classes' slow checks
            out.append(f"{head} {int.__repr__(value)}")
        elif kind is bool:
            out.append(f"{head} {'true' if value else 'false'}")
        elif kind is list and value:
            out.append(head)
            _sequence(value, indent, out, memo)
        elif not value or not isinstance(value, Mapping | list | tuple):
            out.append(f"{head} {_inline(value, cache)}")
        elif isinstance(value, Mapping):
            out.append(head)
            _mapping(value, child, out, sorted(value), memo)
        else:
            out.append(head)
            _sequence(value, indent, out, memo)


def _sequence(
    items: Sequence[Any], indent: str, out: list[str], memo: tuple[dict[str, str], _Heads]
) -> None:
    """Append the block lines of a non-empty sequence; a nested block starts on the dash line."""
    cache, dash, inner = memo[0], indent + "- ", indent + "  "
    cut = len(inner)
    for item in items:
        kind = type(item)
        if kind is str:
            out.append(dash + (cache.get(item) or _text(item, cache)))
        elif kind is dict and item:
            start = len(out)
            _mapping(item, inner, out, sorted(item), memo)
            out[start] = dash + out[start][cut:]
        elif not item or not isinstance(item, Mapping | list | tuple):
            out.append(dash + _inline(item, cache))
        else:
            start = len(out)
            if isinstance(item, Mapping):
                _mapping(item, inner, out, sorted(item), memo)
            else:
                _sequence(item, inner, out, memo)
            out[start] = dash + out[start][cut:]


def dump(document: Mapping[str, Any]) -> str:
    """One YAML document (a Kubernetes object or a kustomization) as canonical text."""
    if not document:
        return "{}\n"
    out: list[str] = []
    _mapping(document, "", out, _keys(document, top=True), _memo())
    return "\n".join(out) + "\n"


def dump_all(documents: Sequence[Mapping[str, Any]]) -> str:
    """Several documents separated by ``---``."""
    return "---\n".join(dump(d) for d in documents)


def dump_sequence(items: Sequence[Any]) -> str:
    """A top-level YAML sequence (a JSON 6902 patch, for one)."""
    if not items:
        return "[]\n"
    out: list[str] = []
    _sequence(items, "", out, _memo())
    return "\n".join(out) + "\n"


def _memo() -> tuple[dict[str, str], _Heads]:
    memo = current()
    return memo.yaml_scalars, memo.yaml_heads
