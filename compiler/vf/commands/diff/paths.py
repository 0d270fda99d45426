"""Dotted paths into a changed object, as ``vf diff`` names the fields it has no words for."""

from __future__ import annotations

from typing import Any


def segment(key: Any) -> str:
    """One key of a dotted path: ``.key``, or ``["a.b"]`` when it holds a dot."""
    text = str(key)
    return f'["{text}"]' if "." in text or "[" in text or not text else f".{text}"


def changed_paths(old: Any, new: Any, *, prefix: str = "") -> list[str]:
    """The dotted paths whose values differ (a list is one value); a key holding a dot
    is written in brackets and quotes, ``metadata.labels["example.com/tier"]``."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return [prefix.lstrip(".") or "(the object)"] if old != new else []
    found = []
    for key in sorted(set(old) | set(new), key=str):
        if key not in old or key not in new:
            found.append((prefix + segment(key)).lstrip("."))
        elif old[key] != new[key]:
            found.extend(changed_paths(old[key], new[key], prefix=prefix + segment(key)))
    return found
