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

_FIRST_KEYS = ("apiVersion", "kind", "metadata")
_PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./@=+ -]*(:[A-Za-z0-9_./@=+-]+)*$")
_RESERVED = frozenset(
    {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf", "~", "="}
)
_NUMBERISH = re.compile(r"^[-+]?(\.?[0-9]|\.(inf|nan)$)", re.IGNORECASE)
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
        return value if _is_plain(value) else quote(value)
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
    out = ['"']
    for char in text:
        code = ord(char)
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _keys(mapping: Mapping[str, Any], top: bool) -> list[str]:
    if not top:
        return sorted(mapping)
    first = [k for k in _FIRST_KEYS if k in mapping]
    return first + sorted(k for k in mapping if k not in _FIRST_KEYS)


def _emit(value: Any, indent: str, out: list[str], top: bool = False) -> None:
    """Append the block lines of a non-empty mapping or sequence to ``out``."""
    if isinstance(value, Mapping):
        for key in _keys(value, top):
            _emit_entry(f"{indent}{scalar(key)}:", value[key], indent + "  ", out)
    else:
        for item in value:
            _emit_item(indent, item, out)


def _emit_entry(head: str, value: Any, child_indent: str, out: list[str]) -> None:
    if isinstance(value, Mapping | list | tuple) and value:
        out.append(head)
        nested = child_indent if isinstance(value, Mapping) else child_indent[:-2]
        _emit(value, nested, out)
    else:
        out.append(f"{head} {_inline(value)}")


def _emit_item(indent: str, item: Any, out: list[str]) -> None:
    if (isinstance(item, Mapping) and item) or (isinstance(item, list | tuple) and item):
        start = len(out)
        _emit(item, indent + "  ", out)
        out[start] = f"{indent}- {out[start][len(indent) + 2 :]}"
    else:
        out.append(f"{indent}- {_inline(item)}")


def _inline(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, list | tuple):
        return "[]"
    return scalar(value)


def dump(document: Mapping[str, Any]) -> str:
    """One YAML document (a Kubernetes object or a kustomization) as canonical text."""
    out: list[str] = []
    if not document:
        return "{}\n"
    _emit(document, "", out, top=True)
    return "\n".join(out) + "\n"


def dump_all(documents: Sequence[Mapping[str, Any]]) -> str:
    """Several documents separated by ``---``."""
    return "---\n".join(dump(d) for d in documents)


def dump_sequence(items: Sequence[Any]) -> str:
    """A top-level YAML sequence (a JSON 6902 patch, for one)."""
    if not items:
        return "[]\n"
    out: list[str] = []
    _emit(items, "", out)
    return "\n".join(out) + "\n"
