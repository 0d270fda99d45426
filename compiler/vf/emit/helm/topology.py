"""The provision topology's replica counts, derived from ``nodes.<node>.replicas``.

The topology ConfigMap holds one JSON line per node, its replica count among the fields.
Compared across environments, it was verbatim while every environment planned the same
counts and a value of every environment (the whole text) once one differed, so a dev-only
count moved it between the template and every values file. When the environments' texts
differ in nothing but the counts, each shard is one slot that the template prints from its
text and each line's ``nodes.<node>.replicas``: a count changes only its own environment's
values, and a ``--set`` of a Deployment's count reaches the topology too (ADR 179).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from vf.emit.helm.slots import TOPOLOGY, Slot, blank
from vf.textio.objects import Obj

_SHARD = re.compile(r"nodes-\d+\.jsonl")
_COUNT = re.compile(r'"replicas":(\d+)')


def is_topology(obj: Obj) -> bool:
    data = obj.get("data")
    return (
        obj.get("kind") == "ConfigMap"
        and isinstance(data, dict)
        and bool(data)
        and all(isinstance(k, str) and _SHARD.fullmatch(k) for k in data)
    )


def _parts(text: str, *, nodes: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The shard's text cut around each line's count: text, node, text, …, text; None when
    a line is not one node's with one count the values hold."""
    parts: list[str] = []
    done = 0
    at = 0
    for line in text.splitlines(keepends=True):
        try:
            name = json.loads(line).get("name")
        except (ValueError, AttributeError):
            return None
        counts = list(_COUNT.finditer(line))
        if not isinstance(name, str) or name not in nodes or len(counts) != 1:
            return None
        start, end = at + counts[0].start(1), at + counts[0].end(1)
        parts += [text[done:start], name]
        done = end
        at += len(line)
    return (*parts, text[done:])


def with_topology_slots(
    slots: list[Slot], *, versions: Mapping[str, Obj], nodes: Mapping[str, Any]
) -> list[Slot]:
    """``slots`` with each shard derived from the counts, where the environments' shards
    differ in the counts alone."""
    first = versions[sorted(versions)[0]]
    if not is_topology(first):
        return slots
    out = list(slots)
    for shard in first["data"]:
        cut = [
            _parts(str((v.get("data") or {}).get(shard, "")), nodes=nodes)
            for v in versions.values()
        ]
        texts = {None if c is None else c[::2] for c in cut}
        names = {None if c is None else c[1::2] for c in cut}
        if None in texts or len(texts) != 1 or len(names) != 1:
            continue
        path = ("data", shard)
        out = [s for s in out if s.path != path]
        assert cut[0] is not None
        out.append(Slot(path=path, values=blank(versions), key=(TOPOLOGY, *cut[0])))
    return out
