"""A file's text as the emitters hand it on: one string, or pieces made as they are read."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Chunks:
    """A large file's text in pieces, made while they are read; read them once, in order."""

    pieces: Iterable[str]


FileText = str | Chunks


def whole(text: FileText) -> str:
    """The text as one string."""
    return text if isinstance(text, str) else "".join(text.pieces)
