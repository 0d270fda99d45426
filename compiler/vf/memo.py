"""What one compile remembers: tables keyed on the compile's own texts, dropped with it.

A compile writes the same short strings and builds equal small values thousands of times
(label keys and values, mapping keys at each indent, one environment's replica count), so
the YAML writer remembers what it made. Those tables are
keyed on the user's texts; kept in modules, they would live as long as the process (a test
session, an editor compiling graph after graph). Here they live in one ``CompileMemo``
that ``compiling()`` opens where a compile is entered (``vf.pipeline``) and closes when it
ends; code below reaches it through ``current()``. Outside a compile ``current()`` gives a
fresh memo that nobody keeps, so the same code works, remembering nothing between calls.

What does not depend on a compile (shipped schemas, templates, the MIG layouts) stays a
module's own, built once per process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar


@dataclass(eq=False, slots=True)
class CompileMemo:
    """One compile's tables. Each holds at most what its user bounds it to (the YAML
    writer: short strings)."""

    # vf.textio.yamlout: a string's YAML scalar, and ``indent + key + ":"`` per indent.
    yaml_scalars: dict[str, str] = field(default_factory=dict)
    yaml_heads: dict[str, dict[str, str]] = field(default_factory=dict)


_CURRENT: ContextVar[CompileMemo | None] = ContextVar("vf_compile_memo", default=None)


@contextmanager
def compiling() -> Iterator[CompileMemo]:
    """A fresh memo for the block (a compile); the one before it, if any, after."""
    memo = CompileMemo()
    token = _CURRENT.set(memo)
    try:
        yield memo
    finally:
        _CURRENT.reset(token)


def current() -> CompileMemo:
    """The running compile's memo; outside a compile, a fresh one that nobody keeps."""
    memo = _CURRENT.get()
    return memo if memo is not None else CompileMemo()


_KEPT_MAX = 1 << 14  # what a table keeps: a bound on what one large compile spends on it
T = TypeVar("T")


def kept(table: dict[Any, T], key: Any, make: Callable[[], T]) -> T:
    """``table[key]``, made by ``make`` the first time: one object where thousands of
    places hold equal ones that nobody changes (the pods' parts). The
    table keeps at most ``_KEPT_MAX`` entries, a bound on what one compile spends on it."""
    found = table.get(key)
    if found is None:
        found = make()
        if len(table) < _KEPT_MAX:
            table[key] = found
    return found
