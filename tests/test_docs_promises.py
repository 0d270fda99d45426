"""What the docs promise reads as what vf does: a promise states its exceptions where it
is made, not only in a later section."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _paragraph(text: str, starts: str) -> str:
    found = [p for p in re.split(r"\n\s*\n", text) if p.startswith(starts)]
    assert len(found) == 1, starts
    return " ".join(found[0].split())


def test_the_idempotent_consumers_promise_states_its_crash_window() -> None:
    """docs/reliability.md's "What vf cannot guarantee" says a process killed between a
    sink's apply and its record applies that item again: the promise itself says so."""
    text = (DOCS / "reliability.md").read_text(encoding="utf-8")
    promise = _paragraph(text, "**An idempotent consumer")
    assert "nothing is applied twice" not in promise and "even across crashes" not in promise
    assert "applied again after the restart" in promise, promise
    assert "the store lost" in promise and "idempotency key" in promise, promise
    limits = text[text.index("## What vf cannot guarantee") :]
    assert "applies that one item again after restart" in " ".join(limits.split())
