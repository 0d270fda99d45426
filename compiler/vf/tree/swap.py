"""Swap a staged tree in for the output directory: one writer at a time, nothing lost.

Writers of one output directory are serialized by an exclusive ``flock`` on its parent
directory, held from reading the previous tree's manifest to the swap, so a second
compile never mistakes the first one's files for the user's.

Where the kernel or filesystem has no ``renameat2(RENAME_EXCHANGE)`` (macOS, NFS, vfat),
the swap is two renames: the previous tree is set aside as ``.NAME.vf-old-PID``, then the
new tree takes its place. A kill between the two leaves no output directory; the next
writer (under the lock) moves the set-aside tree back before anything else. A set-aside
tree is never swept as a leftover while the output directory is missing.
"""

from __future__ import annotations

import fcntl
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from vf.errors import EnvironmentProblem

if TYPE_CHECKING:
    import ctypes

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
LOCK_WAIT_SECONDS = 600.0


def libc() -> ctypes.CDLL | None:
    import ctypes  # only a write needs the C library: ``vf compile --check`` never loads it

    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


@contextmanager
def writer_lock(parent: Path, name: str) -> Iterator[None]:
    """Hold the exclusive writer lock of ``parent/name`` (waits for another writer)."""
    fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise EnvironmentProblem(
                        "VF_OUTPUT_BUSY",
                        f"another vf compile has been writing {name!r} in {str(parent)!r} "
                        f"for over {LOCK_WAIT_SECONDS:.0f} s",
                        "wait for it to finish, or stop it, then compile again",
                        str(parent / name),
                    ) from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT back while the block runs: the swap and its clean-up are never cut
    short, and an interrupt that came once the new tree was in place is not reported as
    a failure (it is raised only when the block itself fails)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        yield
    except BaseException:
        signal.signal(signal.SIGINT, previous)
        if seen:
            raise KeyboardInterrupt from None
        raise
    signal.signal(signal.SIGINT, previous)


def aside_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.vf-old-{os.getpid()}")


def recover(target: Path) -> None:
    """Finish a two-rename swap a kill interrupted (call under the writer lock)."""
    asides = sorted(target.parent.glob(f".{target.name}.vf-old-*"))
    if not asides:
        return
    if not os.path.lexists(target):
        os.rename(asides[0], target)  # the previous tree, with the user's files, is back
        asides = asides[1:]
    # The output directory is in place: a set-aside tree is one whose user files were
    # carried into it before the swap.
    for aside in asides:
        remove_tree(aside)


def sweep_leftovers(parent: Path, name: str) -> None:
    """Remove staging directories a killed run left next to the output."""
    for leftover in parent.glob(f".{name}.vf-new-*"):
        pid = leftover.name.rsplit("-", 1)[-1]
        if not (pid.isdigit() and _alive(int(pid))) or int(pid) == os.getpid():
            remove_tree(leftover)


def remove_tree(path: Path) -> None:
    """Delete a tree, whatever of it is left; shutil (and the compression modules it loads)
    only when a write replaces or sweeps one: ``vf compile --check`` never needs it."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def exchange(new: Path, old: Path) -> None:
    """Swap two directories; after it ``old`` holds the new tree and ``new`` the previous."""
    renameat2 = getattr(libc(), "renameat2", None)
    if renameat2 is not None:
        rc = renameat2(_AT_FDCWD, os.fsencode(new), _AT_FDCWD, os.fsencode(old), _RENAME_EXCHANGE)
        if rc == 0:
            return
    aside = aside_path(old)
    os.rename(old, aside)
    try:
        os.rename(new, old)
    except OSError:
        os.rename(aside, old)
        raise
    os.rename(aside, new)
