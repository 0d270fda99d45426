"""A folder a command writes into, made and tried before the command starts its work.

A folder that cannot be made or written (no write permission, a file where a folder of
its path should be, a read-only file system) belongs to the machine, not to vf: it is
the environment problem ``VF_FOLDER_WRITE`` (exit 3) naming the folder, never a crash.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from vf.errors import EnvironmentProblem


def unwritable(folder: Path, exc: OSError, *, what: str, other: str) -> EnvironmentProblem:
    """The error for ``folder`` (``what`` names it to the user; ``other``: how to pass
    another) that could not be made or written, ``exc`` saying why."""
    return EnvironmentProblem(
        "VF_FOLDER_WRITE",
        f"cannot create or write {what} {str(folder)!r}: {exc.strerror or exc}",
        f"make {str(folder)!r} a folder the user vf runs as can write (check its owner and "
        f"mode, and that no file stands in its path), or {other}",
        str(folder),
    )


def writable_folder(folder: Path, *, what: str, other: str) -> Path:
    """``folder`` made with its parents where missing, a file created and removed in it,
    and returned absolute; :func:`unwritable` when either fails."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=".vf-write-", dir=folder)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise unwritable(folder, exc, what=what, other=other) from None
    return folder.resolve()
