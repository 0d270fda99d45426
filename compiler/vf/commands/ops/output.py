"""How operator commands print: aligned tables for people, JSON for machines."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import click

from vf.errors import VfError

FORMATS = ("table", "json")


def age(seconds: float | None) -> str:
    """``42s``, ``7m``, ``3h``, ``2d``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{max(0, int(seconds))}s"


def now() -> datetime:
    return datetime.now(UTC)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns as wide as their widest cell; the last column is left unpadded."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        padded = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + [row[-1]]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


def emit(fmt: str, data: Any, human: Callable[[], str]) -> None:
    """Print ``data`` as JSON, or what ``human`` renders."""
    if fmt == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=True, default=str, ensure_ascii=False))
    else:
        click.echo(human())


def confirm_required(action: str, flag: str, *, where: str) -> VfError:
    """The refusal of a command that would change the broker without its explicit flag."""
    return VfError(
        "VF_CONFIRM",
        f"{action} changes the broker and was not confirmed; nothing was changed",
        f"pass {flag} to do it (the lines above say what it would do)",
        where,
    )


def fields_text(fields: Mapping[str, Any], *, indent: str = "") -> list[str]:
    """``key: value`` lines, a non-empty mapping as its own indented block, ``-`` for empty."""
    lines = []
    for key, value in fields.items():
        if isinstance(value, Mapping) and value:
            lines.append(f"{indent}{key}:")
            lines += fields_text(value, indent=indent + "  ")
        else:
            shown = "-" if value in ("", None) or value == {} else value
            lines.append(f"{indent}{key}: {shown}")
    return lines
