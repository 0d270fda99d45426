"""Where a local run's workers serve ``/metrics``: a Prometheus file-based discovery file.

``vf run-local`` gives every replica life a fresh health port. It keeps the live ones in a
``file_sd_configs`` file (Prometheus' ``[{"targets": [...], "labels": {...}}]`` form), so
a Prometheus of the user's follows the run as replicas start, restart and end. The group's
labels stand for what a cluster's scrape adds: ``namespace``, which the alerts and the
dashboard select by (docs/observability.md). The file is replaced whole (write, then
rename), so a reader never sees half of it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

TARGETS_FILE = "prometheus-targets.json"


@dataclass(frozen=True, kw_only=True)
class ScrapeTargets:
    """The file of a run's scrape targets, and the labels its one group gives them."""

    path: Path
    labels: Mapping[str, str] = field(default_factory=dict)

    def write(self, ports: Iterable[int]) -> None:
        """Replace the file with the targets on ``ports`` (0 and below: no health server)."""
        targets = [f"127.0.0.1:{port}" for port in sorted(set(ports)) if port > 0]
        document = [{"targets": targets, "labels": dict(sorted(self.labels.items()))}]
        partial = self.path.with_name(f".{self.path.name}.partial")
        partial.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        os.replace(partial, self.path)
