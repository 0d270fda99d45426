"""Reading a file vf did not write, and the JSON in it, without trusting either.

A path a user or a neighbouring tree hands vf may be a link to ``/dev/zero``, a FIFO no
one writes to, a file of gigabytes, or JSON nested two hundred thousand levels deep.
:func:`read_regular` opens it without following a link at the last step and without
blocking, reads only a regular file and at most ``limit`` bytes; :func:`load_json`
parses with a bound on nesting. Each failure is an :class:`Unreadable` whose text says
what was found, for the caller to turn into its own named error or warning.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MAX_JSON_DEPTH = 200
_CHUNK = 1 << 20


class Unreadable(ValueError):
    """Why a file or a text cannot be read; ``str()`` is a phrase such as "a FIFO"."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def read_regular(path: Path, *, limit: int, follow: bool = False) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them.

    A link (at the last step, unless ``follow``: a file the user named may be a link to
    their own file), a FIFO, a device, a socket, a directory or a file above ``limit``
    bytes is refused without reading a byte of it; so is a file that grows past
    ``limit`` while it is read.
    """
    try:
        fd = os.open(path, _FLAGS & ~os.O_NOFOLLOW if follow else _FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise Unreadable("a symbolic link") from None
        if exc.errno == errno.ENXIO:
            raise Unreadable("a FIFO or socket with no writer") from None
        raise Unreadable(exc.strerror or str(exc)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable(_kind(info.st_mode))
        if info.st_size > limit:
            raise Unreadable(f"{info.st_size} bytes, above the {limit} vf reads")
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, _CHUNK):
            size += len(chunk)
            if size > limit:
                raise Unreadable(f"above the {limit} bytes vf reads (it grew while read)")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise Unreadable(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)


def json_depth(value: Any) -> int:
    """How deeply lists and objects nest in ``value`` (a scalar: 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children)
    return deepest


_BRACKET_OR_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)


def _text_depth(text: str) -> int:
    """How deeply ``[`` and ``{`` nest in ``text``, strings skipped: what text that does
    not parse says about its depth, read without recursion."""
    depth = deepest = 0
    for match in _BRACKET_OR_STRING.finditer(text):
        first = match.group()[0]
        if first in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif first in "]}":
            depth = max(depth - 1, 0)
    return deepest


def load_json(data: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value of ``data``; text that is not JSON, not UTF-8, or nests deeper than
    ``max_depth`` is :class:`Unreadable`.

    Text that nests too deeply is said to, also when it is broken further on: Python 3.11
    and 3.12 stop such text with a RecursionError before they reach the break, where 3.13
    parses thousands of levels and reports the break instead."""
    deep = f"JSON nested deeper than the {max_depth} levels vf reads"
    try:
        value = json.loads(data)
    except RecursionError:
        raise Unreadable(deep) from None
    except UnicodeDecodeError as exc:
        raise Unreadable(f"not UTF-8 (byte {exc.start})") from None
    except ValueError as exc:
        text = data if isinstance(data, str) else data.decode(json.detect_encoding(data), "replace")
        raise Unreadable(deep if _text_depth(text) > max_depth else f"not JSON ({exc})") from None
    if json_depth(value) > max_depth:
        raise Unreadable(deep)
    return value
