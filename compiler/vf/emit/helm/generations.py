"""A BATCH flow whose environments have different generations: one template per object.

A BATCH object's name ends in its environment's generation (ADR 80): the Job
``…-double-g8b069ce`` of dev is the Job ``…-double-gc0d8c34`` of prod. Left to its name, each
would be an object of its own in the chart, and every row would be there once per
generation. Matched by their name without the generation instead, they are one object whose
names (its own, and the ConfigMaps it reads) are rendered from the ``generation`` value the
pods' annotation already reads (the broker ConfigMap is a role template's, ADR 236).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vf.emit.helm.job_tags import ANY_TAG, tag_matched
from vf.emit.helm.slots import Slot, below, lookup, string_leaves
from vf.emit.helm.text import GEN_NAME
from vf.textio.objects import Obj

Key = tuple[str, str]
ANY_GENERATION = "*"
GENERATED = "generated"  # no Kubernetes name holds it, so a matched key never meets a real one


def generations(found: Mapping[str, str | None]) -> dict[str, str]:
    """Each environment's generation (``found``: its plan's, or None), when there are
    several environments and each has one, equal or not: the chart is then the same whatever
    one environment's generation is, so a change in dev leaves the templates, and the other
    environments' values, alone."""
    if len(found) < 2 or any(g is None for g in found.values()):
        return {}
    return {env: g for env, g in found.items() if g is not None}


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
    slots = _unchanged_names(slots, versions=versions, gens=gens)
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


def _unchanged_names(
    slots: list[Slot], *, versions: Mapping[str, Obj], gens: Mapping[str, str]
) -> list[Slot]:
    """``slots`` plus a slot for each name that ends in the generation and is the same in
    every environment (no slot of its own yet): it too is rendered from ``generation``."""
    if len(versions) < 2:
        return slots
    taken = [s.path for s in slots]
    seen = set(taken)
    out = list(slots)
    first = versions[sorted(versions)[0]]
    for path, text in string_leaves(first):
        gen = gens[sorted(versions)[0]]
        if path in seen or not text.endswith(gen) or below(path, taken):
            continue
        values = {env: lookup(v, path) for env, v in versions.items()}
        if all(value == text and gens[env] == gen for env, value in values.items()):
            key: tuple[str, ...] = ("generation",) if text == gen else ("$same", text)
            out.append(Slot(path=path, values=values, key=key))
    return out


def stable(key: Key) -> dict[str, Any]:
    """The kind and name an object's chart file and generated values are named after: its
    key, where a matched generation reads ``generation`` and a matched Job's digest ``tag``."""
    kind, name = key
    if name.endswith(ANY_GENERATION):
        name = name[: -len(ANY_GENERATION)] + "generation"
    elif name.endswith(ANY_TAG):
        name = name[: -len(ANY_TAG)] + "tag"
    return {"kind": kind, "metadata": {"name": name}}


def keyed_by_generation(slots: list[Slot], *, base: Obj, key: Key) -> list[Slot]:
    """``slots`` whose generated keys name the object by ``stable(key)``, not by the first
    environment's generation or a Job's own digest."""
    if not key[1].endswith((ANY_GENERATION, ANY_TAG)):
        return slots
    old = f"{base['kind']}/{base['metadata']['name']}"
    new = f"{key[0]}/{stable(key)['metadata']['name']}"
    return [
        Slot(path=s.path, values=s.values, key=(GENERATED, new, *s.key[2:]))
        if s.key[:2] == (GENERATED, old)
        else s
        for s in slots
    ]


def matched_objects(
    prepared: Mapping[str, Mapping[Key, Obj]], *, gens: Mapping[str, str], namespaced: set[Key]
) -> tuple[dict[str, dict[Key, Obj]], set[Key]]:
    """Each environment's objects keyed so that one object of every environment has one
    key: a BATCH name without its generation (ADR 155), a Job's without its own digest
    (ADR 192); and the keys of the namespaced ones."""
    several = len(prepared) > 1 and not gens  # a BATCH Job's name ends in the generation
    indexed: dict[str, dict[Key, Obj]] = {}
    out: set[Key] = set()
    for env, objects in prepared.items():
        mine = indexed[env] = {}
        for key, obj in objects.items():
            to = tag_matched(matched(key, generation=gens.get(env)), obj, several=several)
            mine[to] = obj
            if key in namespaced:
                out.add(to)
    return indexed, out
