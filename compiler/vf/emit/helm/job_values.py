"""Every value a Job's template reads renames the Jobs when it differs from vf's (ADR 224).

A Job's pod template is immutable, so a ``helm upgrade`` whose values change it must name
new Jobs. ``vf.jobKey`` covered ``image.tag`` and the pod overrides (ADR 219); the other
values a Job reads are here. A worker Job (``templates/helm/roles/worker-job.yaml``, ADR
241) reads its ``workers`` and ``nodes`` entries and the sections every worker's pod
reads, and the provision Job (``templates/helm/roles/provision.yaml``, ADR 243) its
``provision`` and ``topology``: ``vf.jobValues`` picks them by a rule written once
(``worker_jobs_read``). A diff-path Job would read what vf lists at compile time
(``job_reads``), which ``values.yaml`` holds as ``jobReads``; none is left. Each
environment's values hold the digest of all of it as vf compiled it (``jobValues``);
``vf.jobValues`` makes the same digest of the values Helm renders, and ``vf.jobKey``
takes it when the two differ: a value set to what vf compiled changes no name. A node's
pod overrides stay the override rule's (an empty one counts as unset).

Both digests are of the same text, Go's ``encoding/json`` as Helm's ``toJson`` writes it
(``go_json``): sorted keys, ``<``, ``>`` and ``&`` escaped, every number a float64 (Helm
reads a values file's numbers so).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from vf.emit.helm.overrides import FIELDS
from vf.emit.helm.rows import Member, Shape
from vf.emit.helm.slots import TOPOLOGY, ValueKey
from vf.emit.helm.text import (
    GEN_NAME,
    NB_TASKS_KEY,
    POD,
    POD_WHOLE,
    TEMPLATED,
    WRAP,
)
from vf.textio.objects import Obj

JOB_VALUES = "jobValues"  # each environment's digest of what its Jobs read
JOB_READS = "jobReads"  # values.yaml: what the diff path's Job templates read
DIGEST_LEN = 16
JOB_VALUES_SCHEMA: Obj = {
    "type": "string",
    "pattern": f"^[0-9a-f]{{{DIGEST_LEN}}}$",
    "description": "The digest of the values the Jobs' templates read, as vf compiled them "
    "(generated): where the values rendered differ, every Job is renamed (a BATCH flow: a "
    "new generation).",
}
# what every worker Job's pod reads besides its own entries, in vf.jobValues's order
JOB_READS_SCHEMA: Obj = {
    "type": "object",
    "additionalProperties": {"type": "array", "items": {"type": "string"}},
    "description": "The values the provision Job's template reads (generated; recompile "
    "to change): vf.jobValues digests them with the worker Jobs' own.",
}
_WORKER_SECTIONS = (
    "commonAnnotations",
    "commonLabels",
    "flow",
    "generation",
    "imagePullPolicy",
    "priorityClassName",
    "workerPod",
)
_WRAPPERS = {TEMPLATED: 1, WRAP: 2}  # where the value key inside starts


def _nodes_read(key: ValueKey) -> list[str] | None:
    """The nodes whose replica count a derived value reads; None for another value."""
    head = key[0]
    if head == NB_TASKS_KEY:
        return [key[1]]
    if head == TOPOLOGY:
        return list(key[2::2])
    return None


def _reads(key: ValueKey) -> list[ValueKey]:
    """The values one slot of a template reads (a node's replica count: the node's entry)."""
    head = key[0]
    if head == POD:  # the overrides are vf.jobKey's own rule; vf's value beside them is not
        return _reads(key[4:]) if key[2] in POD_WHOLE and len(key) > 4 else []
    if head in _WRAPPERS:
        return _reads(key[_WRAPPERS[head] :])
    nodes = _nodes_read(key)
    if nodes is not None:
        return [("nodes", node) for node in nodes]
    if head == GEN_NAME:
        return [("generation",)]
    return [] if head.startswith("$") else [key]


def job_reads(members: Sequence[Member], shapes: Sequence[Shape]) -> dict[str, list[str]]:
    """The values the Jobs' templates read: each top-level key with the entries read below
    it, or none where the whole value is read."""
    whole: set[str] = set()
    named: dict[str, set[str]] = {}
    for member in members:
        if member.key[0] != "Job":
            continue
        for slot in member.slots:
            for key in _reads(slot.key):
                if len(key) == 1:
                    whole.add(key[0])
                else:
                    named.setdefault(key[0], set()).add(key[1])
    rows = {shape.name for shape in shapes if shape.base.get("kind") == "Job"}
    if rows:
        named["rows"] = rows
    out = {top: sorted(names) for top, names in named.items() if top not in whole}
    out.update({top: [] for top in whole})
    return dict(sorted(out.items()))


def picked(reads: Mapping[str, Sequence[str]], values: Mapping[str, Any]) -> list[Any]:
    """What ``reads`` names in ``values``, in ``vf.jobValues``'s order; a node's entry
    without its pod overrides."""
    out: list[Any] = []
    for top in sorted(reads):
        section = values.get(top)
        if not reads[top]:
            out.append(section)
            continue
        for name in reads[top]:
            entry = section.get(name) if isinstance(section, dict) else None
            if top == "nodes" and isinstance(entry, dict):
                entry = {k: v for k, v in entry.items() if k not in FIELDS}
            out.append(entry)
    return out


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


def job_values_digest(reads: Mapping[str, Sequence[str]], values: Mapping[str, Any]) -> str:
    """The digest ``vf.jobValues`` makes of the same values."""
    text = go_json(picked(reads, values) + worker_jobs_read(values))
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
