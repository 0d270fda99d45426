"""Say where a YAML syntax error is, and how to fix it, the way a person would.

The parser reports where it noticed the problem, which is often the line after the
mistake (a key without its colon is found at the next key) or far from it (an unclosed
``{`` or quote is found where the file ends). This module points at the line to edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SyntaxReport:
    line: int | None  # 1-based; None when the parser gave no position
    what: str
    fix: str


def _mark_line(mark: Any) -> int | None:
    return mark.line + 1 if mark is not None else None


def _previous_content_line(lines: list[str], line: int) -> int | None:
    for index in range(line - 2, -1, -1):
        stripped = lines[index].strip()
        if stripped and not stripped.startswith("#"):
            return index + 1
    return None


@dataclass(frozen=True)
class _Seen:
    problem: str
    context: str
    at: int | None
    began: int | None
    lines: list[str]
    duplicate: bool


def describe(exc: Any, text: str) -> SyntaxReport:
    """Where and what the YAML error ``exc`` (raised reading ``text``) is, and its fix."""
    seen = _Seen(
        problem=str(getattr(exc, "problem", None) or exc).splitlines()[0],
        context=str(getattr(exc, "context", None) or ""),
        at=_mark_line(getattr(exc, "problem_mark", None)),
        began=_mark_line(getattr(exc, "context_mark", None)),
        lines=text.splitlines(),
        duplicate=type(exc).__name__ == "DuplicateKeyError",
    )
    for rule in (_duplicate, _missing_colon, _unclosed):
        report = rule(seen)
        if report is not None:
            return report
    if "\\t" in seen.problem or "\t" in seen.problem:
        return SyntaxReport(seen.at, seen.problem, "indent with spaces; YAML does not allow tabs")
    if "block end" in seen.problem:
        return SyntaxReport(seen.at, seen.problem, "indent this line like the keys beside it")
    return SyntaxReport(seen.at, seen.problem, "fix the YAML syntax on this line")


def _duplicate(seen: _Seen) -> SyntaxReport | None:
    if not seen.duplicate:
        return None
    first = f" (the first is on line {seen.began})" if seen.began else ""
    return SyntaxReport(seen.at, seen.problem, f"remove or rename one of the two keys{first}")


def _missing_colon(seen: _Seen) -> SyntaxReport | None:
    if "mapping values are not allowed" not in seen.problem or seen.at is None:
        return None
    before = _previous_content_line(seen.lines, seen.at)
    if before is not None:
        text = seen.lines[before - 1]
        if ":" not in text and not _item(text):
            what = f"{text.strip()!r} has no ':' after its key"
            return SyntaxReport(before, what, "write key: value (a colon, a space)")
    return SyntaxReport(seen.at, seen.problem, "quote a value that holds ': ' (\"a: b\")")


def _unclosed(seen: _Seen) -> SyntaxReport | None:
    if "flow mapping" in seen.context or "flow sequence" in seen.context:
        bracket = "{ ... }" if "mapping" in seen.context else "[ ... ]"
        return SyntaxReport(seen.began or seen.at, seen.problem, f"close the {bracket} opened here")
    if "quoted scalar" in seen.context:
        return SyntaxReport(seen.began or seen.at, seen.problem, "close the quote opened here")
    return None


def _item(line: str) -> bool:
    return line.strip().startswith("- ") or line.strip() == "-"
