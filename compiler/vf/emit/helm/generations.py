"""A BATCH flow whose environments have different generations: one template per object.

A BATCH object's name ends in its environment's generation (ADR 80): the Job
``…-double-g8b069ce`` of dev is the Job ``…-double-gc0d8c34`` of prod. Left to its name, each
would be an object of its own in the chart, and every row would be there once per
generation. Matched by their name without the generation instead, they are one object whose
names (its own, and the ConfigMaps it reads) are rendered from the ``generation`` value the
broker ConfigMap and the pods' annotation already read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vf.emit.helm.slots import Slot
from vf.emit.helm.text import GEN_NAME
from vf_runtime.labels import BROKER_CONFIG, COMPONENT

Obj = dict[str, Any]
Key = tuple[str, str]
ANY_GENERATION = "*"  # no Kubernetes name holds it, so a matched key never meets a real one


def generations(indexed: Mapping[str, Mapping[Key, Obj]]) -> dict[str, str]:
    """Each environment's generation, when every environment has one and they differ."""
    found: dict[str, str] = {}
    for env, objects in indexed.items():
        for (kind, _), obj in objects.items():
            labels = obj["metadata"].get("labels") or {}
            generation = (obj.get("data") or {}).get("VF_GENERATION")
            broker = labels.get(COMPONENT) == BROKER_CONFIG
            if kind == "ConfigMap" and broker and isinstance(generation, str):
                found[env] = generation
    if len(found) < len(indexed) or len(set(found.values())) < 2:
        return {}
    return found


def matched(key: Key, *, generation: str | None) -> Key:
    """An object's key with its environment's generation at the end of its name as ``*``."""
    kind, name = key
    if generation is None or not name.endswith(f"-{generation}"):
        return key
    return (kind, name[: -len(generation)] + ANY_GENERATION)


def with_generation_names(
    slots: list[Slot], *, versions: Mapping[str, Obj], gens: Mapping[str, str]
) -> list[Slot]:
    """``slots`` with each text that is one prefix and the environment's generation in
    every environment rendered from the ``generation`` value."""
    if not gens:
        return slots
    out = []
    for slot in slots:
        ends = all(
            isinstance(value, str) and value.endswith(gens[env])
            for env, value in slot.values.items()
        )
        prefixes = {str(v)[: -len(gens[e])] for e, v in slot.values.items()} if ends else set()
        if len(versions) > 1 and len(prefixes) == 1 and next(iter(prefixes)):
            out.append(Slot(path=slot.path, values=slot.values, key=(GEN_NAME, prefixes.pop())))
        else:
            out.append(slot)
    return out
