"""Every value a Job's template reads renames the Jobs when it differs from vf's (ADR 224).

A Job's pod template is immutable, so a ``helm upgrade`` whose values change it must name
new Jobs. ``vf.jobKey`` covered ``image.tag`` and the pod overrides (ADR 219); the other
values a Job reads are here. A worker Job (``templates/helm/roles/worker-job.yaml``, ADR
241) reads its ``workers`` and ``nodes`` entries and the sections every worker's pod
reads, and the provision Job (``templates/helm/roles/provision.yaml``, ADR 243) its
``provision`` and ``topology``: ``vf.jobValues`` picks them by a rule written once
(``worker_jobs_read``). Each environment's values hold the digest of all of it as vf
compiled it (``jobValues``); ``vf.jobValues`` makes the same digest of the values Helm
renders, and ``vf.jobKey`` takes it when the two differ: a value set to what vf compiled
changes no name. A node's pod overrides stay the override rule's (an empty one counts as
unset).

Both digests are of the same text, Go's ``encoding/json`` as Helm's ``toJson`` writes it
(``go_json``): sorted keys, ``<``, ``>`` and ``&`` escaped, every number a float64 (Helm
reads a values file's numbers so).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from vf.emit.helm.overrides import FIELDS

JOB_VALUES = "jobValues"  # each environment's digest of what its Jobs read
DIGEST_LEN = 16
# what every worker Job's pod reads besides its own entries, in vf.jobValues's order
_WORKER_SECTIONS: tuple[str, ...] = ("commonAnnotations", "commonLabels", "flow", "generation")
_WORKER_SECTIONS += ("imagePullPolicy", "priorityClassName", "workerPod")


def worker_jobs_read(values: Mapping[str, Any]) -> list[Any]:
    """What the Job templates read, in ``vf.jobValues``'s order: each Job worker's name,
    ``workers`` entry and ``nodes`` entry (without its pod overrides), the sections every
    worker's pod reads, then the provision Job's ``provision`` and ``topology``."""
    defaults = (values.get("workerPod") or {}).get("defaults") or {}
    workers = values.get("workers") or {}
    nodes = values.get("nodes") or {}
    jobs = []
    for node in sorted(workers):
        entry = workers[node] or {}
        if str(entry.get("kind", defaults.get("kind"))) == "Job":
            knobs = {k: v for k, v in (nodes.get(node) or {}).items() if k not in FIELDS}
            jobs.append([node, entry, knobs])
    shared = [values.get(key) for key in _WORKER_SECTIONS]
    return [[jobs, *shared, values.get("provision"), values.get("topology")]]


def job_values_digest(values: Mapping[str, Any]) -> str:
    """The digest ``vf.jobValues`` makes of the same values."""
    text = go_json(worker_jobs_read(values))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_LEN]


_HTML = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def go_json(value: Any) -> str:
    """``value`` as Go's ``encoding/json`` writes it once Helm has read it from YAML."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _go_number(float(value))
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False).translate(_HTML)
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: str(k).encode("utf-8"))
        return "{" + ",".join(f"{go_json(str(k))}:{go_json(value[k])}" for k in keys) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    raise TypeError(f"not a values type: {type(value).__name__}")


def _go_number(number: float) -> str:
    """A float64 as ``encoding/json`` writes it: the shortest digits, positional between
    1e-6 and 1e21, else with an exponent (``1e-7``, ``1e+21``)."""
    size = abs(number)
    if size == 0 or 1e-6 <= size < 1e21:
        text = format(Decimal(repr(number)), "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    text = repr(number)
    if text[-4:-1] == "e-0":  # e-07 -> e-7
        text = text[:-2] + text[-1]
    return text
