"""Finding the command-line tools vf runs (helm, kubectl): on PATH, else where the
project's own set-up put them.

``make setup`` (scripts/setup) installs helm and kubectl into ``.tools/bin`` of the
checkout without touching PATH, so a newcomer who ran it has the tools and vf must find
them: in ``.tools/bin`` of the current folder, then of the checkout vf runs from.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

TOOLS_DIR = Path(".tools") / "bin"


def tool_folders() -> list[Path]:
    """Where vf looks after PATH, in order."""
    checkout = Path(__file__).resolve().parents[3]  # compiler/vf/runtree/tools.py
    found: list[Path] = []
    for folder in (Path.cwd() / TOOLS_DIR, checkout / TOOLS_DIR):
        if folder not in found:
            found.append(folder)
    return found


def find_tool(name: str) -> str | None:
    """The path of ``name``: on PATH, else in a project's ``.tools/bin``; None if nowhere."""
    found = shutil.which(name)
    if found is not None:
        return found
    for folder in tool_folders():
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def where_looked(name: str) -> str:
    """``PATH, ./.tools/bin and …/.tools/bin`` for a message about ``name``."""
    return "PATH, " + " and ".join(str(folder / name) for folder in tool_folders())
