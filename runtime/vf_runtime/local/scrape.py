"""Where a run's workers serve ``/metrics``: a Prometheus file-based discovery file.

``vf run-local`` gives every replica life a fresh health port. It keeps the live ones in a
``file_sd_configs`` file (Prometheus' ``[{"targets": [...], "labels": {...}}]`` form), so
a Prometheus of the user's follows the run as replicas start, restart and end. The group's
labels stand for what a cluster's scrape adds: ``namespace``, which the alerts and the
dashboard select by (docs/observability.md). ``vf run-tree`` writes the same form, a group
per pod, from what the tree's ServiceMonitor selects. The file is replaced whole (write,
then rename), so a reader never sees half of it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

TARGETS_FILE = "prometheus-targets.json"


def loopback(port: int) -> str:
    """The target address of a health server on this machine's ``port``."""
    return f"127.0.0.1:{port}"


@dataclass(frozen=True, kw_only=True)
class TargetGroup:
    """One group of a file_sd file: targets (``host:port``) and the labels they all get."""

    targets: tuple[str, ...]
    labels: Mapping[str, str] = field(default_factory=dict)

    def document(self) -> dict[str, object]:
        return {"targets": list(self.targets), "labels": dict(sorted(self.labels.items()))}


def write_groups(path: Path, groups: Iterable[TargetGroup]) -> None:
    """Replace ``path`` with ``groups``: written beside it, then renamed over it."""
    document = [group.document() for group in groups]
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    os.replace(partial, path)


@dataclass(frozen=True, kw_only=True)
class ScrapeTargets:
    """The file of a run's scrape targets, and the labels its one group gives them."""

    path: Path
    labels: Mapping[str, str] = field(default_factory=dict)

    def write(self, ports: Iterable[int]) -> None:
        """Replace the file with the targets on ``ports`` (0 and below: no health server)."""
        targets = tuple(loopback(port) for port in sorted(set(ports)) if port > 0)
        write_groups(self.path, [TargetGroup(targets=targets, labels=self.labels)])
