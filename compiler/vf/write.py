"""Write a rendered tree to disk: all or nothing, only into a directory vf owns.

The new tree is built completely in a sibling directory and swapped in with one
atomic ``renameat2(RENAME_EXCHANGE)``, so a crash leaves either the previous tree
or the new one. Files vf did not generate are carried over untouched; files it did
generate and no longer emits are pruned.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import difflib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from vf.errors import EnvironmentProblem, VfError

MANIFEST = ".vf-manifest.json"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def manifest_text(files: list[str]) -> str:
    """The ownership marker: which files of the directory vf generated."""
    doc = {"generator": "vf", "files": sorted(files)}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def with_manifest(tree: Mapping[str, str]) -> dict[str, str]:
    full = dict(tree)
    full[MANIFEST] = manifest_text(list(tree))
    return full


def owned_files(out: Path) -> list[str] | None:
    """Files vf generated in ``out`` last time; None when vf does not own ``out``."""
    marker = out / MANIFEST
    if not marker.is_file():
        return None
    try:
        doc = json.loads(marker.read_text(encoding="utf-8"))
        files = doc["files"]
    except (ValueError, KeyError, TypeError, OSError):
        return None
    if doc.get("generator") != "vf" or not all(isinstance(f, str) for f in files):
        return None
    return [f for f in files if _safe_relative(f)]


def _safe_relative(path: str) -> bool:
    parts = Path(path).parts
    return bool(parts) and not Path(path).is_absolute() and ".." not in parts


def check_owned(out: Path) -> list[str]:
    """The files vf owns in ``out`` (empty for a new or empty directory), else refuse."""
    if not out.exists():
        return []
    if not out.is_dir():
        raise VfError(
            "VF_OUTPUT_NOT_DIR",
            f"output path {str(out)!r} exists and is not a directory",
            "pass --out a directory path",
            str(out),
        )
    owned = owned_files(out)
    if owned is None:
        if any(out.iterdir()):
            raise VfError(
                "VF_OUTPUT_NOT_OWNED",
                f"{str(out)!r} is not empty and was not written by vf",
                "choose an empty or new directory for --out; "
                "vf never overwrites files it did not write",
                str(out),
            )
        return []
    return [*owned, MANIFEST]


def write_tree(out: Path, tree: Mapping[str, str]) -> None:
    """Replace vf's files in ``out`` with ``tree`` in one atomic swap."""
    owned = set(check_owned(out))
    full = with_manifest(tree)
    parent = out.resolve().parent
    parent.mkdir(parents=True, exist_ok=True)
    _sweep_leftovers(parent, out.name)
    staging = parent / f".{out.name}.vf-new-{os.getpid()}"
    try:
        _materialise(staging, full)
        if out.exists():
            _carry_user_files(out, staging, owned)
            _exchange(staging, out)
            shutil.rmtree(staging)
        else:
            os.rename(staging, out)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise EnvironmentProblem(
            "VF_OUTPUT_WRITE",
            f"could not write {str(out)!r}: {exc.strerror or exc}",
            "check permissions and free space; the previous tree is unchanged",
            str(out),
        ) from None


def _sweep_leftovers(parent: Path, name: str) -> None:
    """Remove staging directories a killed run left next to the output."""
    for leftover in parent.glob(f".{name}.vf-new-*"):
        pid = leftover.name.rsplit("-", 1)[-1]
        if not (pid.isdigit() and _alive(int(pid))) or int(pid) == os.getpid():
            shutil.rmtree(leftover, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _materialise(root: Path, tree: Mapping[str, str]) -> None:
    root.mkdir()
    for rel in sorted(tree):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(tree[rel])
            handle.flush()
            os.fsync(handle.fileno())
    _fsync_dir(root)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _carry_user_files(out: Path, staging: Path, owned: set[str]) -> None:
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out).as_posix()
        if path.is_dir() or rel in owned or (staging / rel).exists():
            continue
        target = staging / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)


def _exchange(new: Path, old: Path) -> None:
    """Atomically swap two directories; after it ``old`` holds the new tree."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        rc = renameat2(_AT_FDCWD, os.fsencode(new), _AT_FDCWD, os.fsencode(old), _RENAME_EXCHANGE)
        if rc == 0:
            return
    # No atomic exchange on this platform: two renames, the narrowest window available.
    aside = new.with_name(new.name + "-old")
    os.rename(old, aside)
    os.rename(new, old)
    os.rename(aside, new)


def diff_tree(out: Path, tree: Mapping[str, str]) -> str:
    """A unified diff from the tree on disk to ``tree``; empty when they are equal."""
    full = with_manifest(tree)
    owned = set(owned_files(out) or []) if out.is_dir() else set()
    chunks: list[str] = []
    for rel in sorted(owned | set(full)):
        path = out / rel
        before = path.read_text(encoding="utf-8") if path.is_file() else None
        after = full.get(rel)
        if before == after:
            continue
        chunks.extend(
            difflib.unified_diff(
                (before or "").splitlines(keepends=True),
                (after or "").splitlines(keepends=True),
                fromfile=f"a/{rel}" if before is not None else "/dev/null",
                tofile=f"b/{rel}" if after is not None else "/dev/null",
            )
        )
    return "".join(chunks)
