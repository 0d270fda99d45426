"""The chart's version: it orders, and it changes exactly when the chart does.

A digest alone (``0.1.0+<digest>``) never increases, so Helm, chart repositories and Flux
(which rebuilds a chart from Git only when its version changes) could not tell a newer
chart from an older one. vf keeps the digest of every chart file in Chart.yaml's
annotations and, reading the committed Chart.yaml, raises the patch version when the
digest differs: the same input and the same committed tree still give the same version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

DIGEST_ANNOTATION = "vf.dev/chart-digest"
FIRST = "0.1.0"
_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")


@dataclass(frozen=True, kw_only=True)
class CommittedChart:
    version: str
    digest: str


def committed_chart(out: Path | None) -> CommittedChart | None:
    """The version and digest of the chart committed at ``out`` (None when there is none)."""
    path = None if out is None else out / "chart" / "Chart.yaml"
    if path is None or not path.is_file():
        return None
    try:
        chart = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, YAMLError):
        return None  # unreadable: start again from the first version
    if not isinstance(chart, dict):
        return None
    annotations = chart.get("annotations") or {}
    version, digest = chart.get("version"), annotations.get(DIGEST_ANNOTATION)
    if not (isinstance(version, str) and _SEMVER.match(version) and isinstance(digest, str)):
        return None
    return CommittedChart(version=version, digest=digest)


def chart_version(digest: str, *, committed: CommittedChart | None) -> str:
    """The committed version when the chart is unchanged, else its next patch version."""
    if committed is None:
        return FIRST
    if committed.digest == digest:
        return committed.version
    major, minor, patch = (int(p) for p in committed.version.split("."))
    return f"{major}.{minor}.{patch + 1}"
