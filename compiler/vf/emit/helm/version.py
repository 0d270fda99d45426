"""The chart's version (ADR 89, 188): ``Chart.yaml``'s ``vf.dev/content-digest`` unchanged
keeps the tree's version, another takes the next patch number; a first chart is ``0.1.0``,
and the major and minor numbers are the tree's to set by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ruamel.yaml.error import YAMLError

from vf.errors import VfError
from vf.textio.safe_read import Unreadable, read_regular
from vf.textio.yaml_read import reader
from vf_runtime.labels import DOMAIN

DIGEST_ANNOTATION = f"{DOMAIN}/content-digest"
_VERSION = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:\+[0-9A-Za-z.-]+)?$")


@dataclass(frozen=True, kw_only=True)
class ChartRelease:
    """What the tree's current ``Chart.yaml`` says: its version and content digest."""

    version: str
    digest: str | None  # None: a chart from before the digest was recorded


def chart_version(previous: ChartRelease | None, *, digest: str) -> str:
    """The version of a chart whose content digest is ``digest``."""
    if previous is None:
        return "0.1.0"
    if previous.digest == digest:
        return previous.version
    major, minor, patch = previous.version.partition("+")[0].split(".")  # read_previous's
    return f"{major}.{minor}.{int(patch) + 1}"


CHART_BYTES = 1024 * 1024  # vf writes a few hundred bytes


def _problem(what: str, *, where: Path) -> VfError:
    return VfError(
        "VF_CHART_VERSION",
        what,
        "restore chart/Chart.yaml from version control, or set `version:` to a SemVer "
        "such as 1.4.0 (vf counts on from it); deleting it starts again at 0.1.0, lower "
        "than what may be installed",
        str(where),
    )


def read_previous(out: Path) -> ChartRelease | None:
    """The chart the tree at ``out`` holds now, if any."""
    path = out / "chart" / "Chart.yaml"
    if not path.is_file():
        return None
    try:  # vf's own file: a regular one, small, not nested without end
        meta = reader("safe").load(read_regular(path, limit=CHART_BYTES).decode("utf-8"))
    except (Unreadable, UnicodeDecodeError, YAMLError, RecursionError) as exc:
        why = "it nests deeper than vf writes" if isinstance(exc, RecursionError) else exc
        raise _problem(f"the tree's Chart.yaml cannot be read: {why}", where=path) from None
    version = meta.get("version") if isinstance(meta, dict) else None
    if not isinstance(version, str) or not _VERSION.match(version):
        raise _problem(
            f"the tree's Chart.yaml has version {version!r}, not MAJOR.MINOR.PATCH", where=path
        )
    annotations = meta.get("annotations")
    digest = annotations.get(DIGEST_ANNOTATION) if isinstance(annotations, dict) else None
    return ChartRelease(version=version, digest=digest if isinstance(digest, str) else None)
