"""A value a Job's template reads renames the Jobs where it differs from vf's (ADR 224):
each environment's values hold the digest of what its Jobs read as compiled (``jobValues``),
``vf.jobValues`` makes it again of the values Helm renders, and ``vf.jobKey`` takes it where
the two differ. Both are of Go's ``encoding/json`` text as Helm's ``toJson`` writes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from vf.emit.helm.overrides import FIELDS
from vf.emit.helm.workers import worker_kinds

JOB_VALUES = "jobValues"  # each environment's digest of what its Jobs read
DIGEST_LEN = 16
# what every worker Job's pod reads besides its own entries, in vf.jobValues's order
_WORKER_SECTIONS = (
    *("commonAnnotations", "commonLabels", "flow", "generation"),
    *("imagePullPolicy", "priorityClassName", "workerPod"),
)


def worker_jobs_read(values: Mapping[str, Any]) -> list[Any]:
    """What the Job templates read, in ``vf.jobValues``'s order: each Job worker's name,
    ``workers`` entry and ``nodes`` entry (without its pod overrides), the sections every
    worker's pod reads, then the provision Job's ``provision`` and ``topology``."""
    kinds, workers, nodes = worker_kinds(values), values.get("workers", {}), values.get("nodes", {})
    jobs = [
        [node, workers[node], {k: v for k, v in nodes[node].items() if k not in FIELDS}]
        for node in sorted(kinds)
        if kinds[node] == "Job"
    ]
    return [[jobs, *(values.get(key) for key in (*_WORKER_SECTIONS, "provision", "topology"))]]


def job_values_digest(values: Mapping[str, Any]) -> str:
    """The digest ``vf.jobValues`` makes of the same values."""
    return hashlib.sha256(go_json(worker_jobs_read(values)).encode()).hexdigest()[:DIGEST_LEN]


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
