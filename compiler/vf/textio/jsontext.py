"""Indented, key-sorted JSON text, byte for byte what ``json.dumps`` writes, made faster.

``json.dumps`` with an indent runs the pure-Python encoder, which materialises a list of
millions of small chunks for a large document before joining them: slow, and the compile's
peak memory. Here each value becomes one string as soon as its children are done, and
strings go through the C encoder.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

_JSON_CONSTANTS = {None: "null", True: "true", False: "false"}
# The C string encoders where there are ones: UTF-8 text as is, or every non-ASCII escaped.
_ENCODERS: dict[bool, Callable[[str], str]] = {
    False: json.encoder.encode_basestring,
    True: json.encoder.encode_basestring_ascii,
}


_COMPACT = {
    ascii: json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=ascii)
    for ascii in (False, True)
}


def compact_json(value: Any, *, ascii: bool = True) -> str:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii)``
    without building an encoder per call: what vf digests (generations, configuration
    hashes) are taken of, and a node's parameters."""
    return _COMPACT[ascii].encode(value)


def json_text(document: Any, *, ascii: bool = False) -> str:
    """``json.dumps(document, indent=2, sort_keys=True, ensure_ascii=ascii) + "\\n"``."""
    return _json_value(document, "\n", _ENCODERS[ascii]) + "\n"


def _json_value(value: Any, newline: str, encode: Callable[[str], str]) -> str:
    if isinstance(value, str):
        return encode(value)
    if isinstance(value, dict | list | tuple) and value:
        inner = newline + "  "
        items: list[str] = []
        if isinstance(value, dict):
            for key in sorted(value):
                item = value[key]
                kind = type(item)  # the common leaves written here, without a call
                if kind is str:
                    text = encode(item)
                elif kind is int:
                    text = int.__repr__(item)
                elif item is None or kind is bool:
                    text = _JSON_CONSTANTS[item]
                else:
                    text = _json_value(item, inner, encode)
                items.append(encode(str(key)) + ": " + text)
            return "{" + inner + ("," + inner).join(items) + newline + "}"
        for item in value:
            items.append(encode(item) if type(item) is str else _json_value(item, inner, encode))
        return "[" + inner + ("," + inner).join(items) + newline + "]"
    return _json_scalar(value)


def _json_scalar(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list | tuple):
        return "[]"
    if value is None or type(value) is bool:
        return _JSON_CONSTANTS[value]
    if type(value) is int:
        return int.__repr__(value)
    return json.dumps(value)  # floats, and whatever json itself accepts or refuses


# Containers this shallow, or with more items than this, are written piece by piece; the
# rest (a plan's workload or channel, say: a few KiB) is made whole, which costs less.
_STREAM_DEPTH = 2
_STREAM_ITEMS = 64


def json_chunks(document: Any, *, ascii: bool = False) -> Iterator[str]:
    """The text of ``json_text`` in pieces, so a large document never exists as one string:
    the outer containers and long ones are streamed item by item, the rest made whole."""
    yield from _chunks(document, "\n", _ENCODERS[ascii], 0)
    yield "\n"


def _chunks(value: Any, newline: str, encode: Callable[[str], str], depth: int) -> Iterator[str]:
    if not (isinstance(value, dict | list | tuple) and value) or (
        depth >= _STREAM_DEPTH and len(value) <= _STREAM_ITEMS
    ):
        yield _json_value(value, newline, encode)
        return
    inner = newline + "  "
    if isinstance(value, dict):
        yield "{"
        for i, key in enumerate(sorted(value)):
            yield ("," if i else "") + inner + encode(str(key)) + ": "
            yield from _chunks(value[key], inner, encode, depth + 1)
        yield newline + "}"
        return
    yield "["
    for i, item in enumerate(value):
        yield ("," if i else "") + inner
        yield from _chunks(item, inner, encode, depth + 1)
    yield newline + "]"
