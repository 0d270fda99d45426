"""Keys of the chart's ``generated`` values a reviewer can read (ADR 189).

A field the environments differ in that is no knob of its own is a value under
``generated.<object>.<field>``. The object is its kind and its name without what every
name of the flow shares (``vf-<flow>-``, the run, a BATCH name's ``-generation`` or a Job's
``-tag``): ``Job/double``, ``Deployment/redis``. The field is its path in the object,
dotted, a list index in brackets and a key that is no plain word quoted:
``spec.backoffLimit``, ``metadata.labels['example.com/team']``, ``spec.volumes[0].emptyDir``.
Two objects whose short names meet keep their whole names. The keys stay unique and follow
from the objects alone, so a compile writes the same keys every time.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace

from vf.emit.helm.generations import GENERATED
from vf.emit.helm.rows import Member
from vf.emit.helm.slots import Slot, ValueKey
from vf.emit.helm.text import values_key

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_INDEX = re.compile(r"[0-9]+\Z")
_RUN = re.compile(r"r[0-9a-f]{7}-")
_SUFFIXES = ("-generation", "-tag")


def readable_keys(templates: Sequence[Member], *, flow: str) -> list[Member]:
    """``templates`` with every ``generated`` key named by ``short_names`` and
    ``field_path``; the rest as they are."""
    objects = {g[1] for t in templates for s in t.slots if (g := _generated(s.key))}
    if not objects:
        return list(templates)
    short = short_names(sorted(objects), flow=flow)
    return [
        replace(tpl, slots=tuple(_renamed(s, short=short) for s in tpl.slots))
        if any(_generated(s.key) for s in tpl.slots)
        else tpl
        for tpl in templates
    ]


def _generated(key: ValueKey) -> ValueKey | None:
    """The ``generated`` key a slot's values go under, or None."""
    found = values_key(key)
    return found if found is not None and len(found) == 3 and found[0] == GENERATED else None


def _renamed(slot: Slot, *, short: Mapping[str, str]) -> Slot:
    found = _generated(slot.key)
    if found is None:
        return slot
    head = slot.key[: len(slot.key) - len(found)]
    key = (*head, GENERATED, short[found[1]], field_path(found[2]))
    return Slot(path=slot.path, values=slot.values, key=key)


def short_names(objects: Sequence[str], *, flow: str) -> dict[str, str]:
    """Each ``Kind/name`` as ``Kind/<what is its own>``; whole where two would meet."""
    wanted = {o: _short(o, flow=flow) for o in objects}
    counts = Counter(wanted.values())
    chosen = {o: s if counts[s] == 1 else o for o, s in wanted.items()}
    if len(set(chosen.values())) < len(chosen):  # a short name met a whole one
        return {o: o for o in objects}
    return chosen


def _short(obj: str, *, flow: str) -> str:
    kind, _, name = obj.partition("/")
    own = name.removeprefix(f"vf-{flow}-")
    if _RUN.match(own):
        own = own[len("r0000000-") :]
    for suffix in _SUFFIXES:
        own = own.removesuffix(suffix)
    return f"{kind}/{own or name}"


def field_path(pointer: str) -> str:
    """A JSON pointer (``/metadata/labels/example.com~1team``) as a dotted path
    (``metadata.labels['example.com/team']``)."""
    out = ""
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if _INDEX.match(part):
            out += f"[{part}]"
        elif _WORD.match(part):
            out += f".{part}" if out else part
        else:
            quoted = part.replace("\\", "\\\\").replace("'", "\\'")
            out += f"['{quoted}']"
    return out
