"""Read back the files vf wrote, and nothing planted in their place.

A committed tree is checked by ``vf compile --check`` and ``vf diff``, often in CI with
secrets in the environment. A path vf owns may have been replaced by a link
(``plan/dev.json -> /proc/self/environ``) or a device: following it would print
someone else's file in the diff. Every component below the output directory is
therefore opened without following links, only a regular file is read, and anything
else is refused by name without a byte of its content.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from vf.errors import VfError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MAX_OWNED_BYTES = 256 * 1024 * 1024


def _not_regular(out: Path, rel: str, what: str) -> VfError:
    return VfError(
        "VF_OUTPUT_NOT_REGULAR",
        f"{rel} in {str(out)!r} is {what}, not the regular file vf wrote; "
        "vf does not read it and does not show its content",
        f"remove {rel} (or the link above it) and run vf compile again",
        str(out / rel),
    )


def read_owned_bytes(out: Path, rel: str) -> bytes | None:
    """The bytes of vf's file ``rel`` under ``out``; None where nothing is there."""
    parts = rel.split("/")
    try:
        fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            try:
                child = os.open(part, _FILE_FLAGS if last else _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                return None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO, errno.EMLINK):
                    shown = "/".join(parts[: depth + 1])
                    raise _not_regular(out, rel, f"a link or special file at {shown}") from None
                raise
            os.close(fd)
            fd = child
        return _read_regular(fd, out=out, rel=rel)
    finally:
        os.close(fd)


def _read_regular(fd: int, *, out: Path, rel: str) -> bytes:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise _not_regular(out, rel, "a directory or special file")
    if info.st_size > MAX_OWNED_BYTES:
        raise _not_regular(out, rel, f"a file of {info.st_size} bytes")
    chunks: list[bytes] = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def read_owned(out: Path, rel: str) -> str | None:
    """The text of vf's file ``rel`` under ``out`` (see ``read_owned_bytes``)."""
    data = read_owned_bytes(out, rel)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VfError(
            "VF_OUTPUT_NOT_UTF8",
            f"{rel} in {str(out)!r} is not UTF-8 (byte {exc.start}); vf writes only UTF-8",
            f"restore {rel} from version control, or delete it and run vf compile again",
            str(out / rel),
        ) from None
