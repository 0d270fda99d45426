"""``--set image.tag=…``: one tag for every image of the flow's own (workers, provision).

A Job's pod template is immutable and its name carries its template's tag (ADR 80), so a
tag set at install time also renames every Job and gives a BATCH flow a new generation:
``helm upgrade --set image.tag=…`` creates new Jobs on fresh streams and prunes the old
ones, exactly as a recompile would. Without the value the chart renders what it always did.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vf.emit.helm.slots import POD_SPEC, Slot, ValueKey, below, blank, owner
from vf.emit.helm.text import LITERAL, WRAP
from vf.textio.objects import Obj
from vf_runtime.labels import GENERATION_KEY

Path = tuple[str | int, ...]
IMAGE_TAG_VALUES: Obj = {"image": {"tag": None}}
GENERATION_ANNOTATION = ("spec", "template", "metadata", "annotations", GENERATION_KEY)


def _at(obj: Any, path: Path) -> Any:
    for part in path:
        obj = obj[part]
    return obj


def _targets(obj: Obj) -> list[tuple[Path, str]]:
    """The fields image.tag reaches in one object, with the helper for each."""
    kind = obj.get("kind")
    out: list[tuple[Path, str]] = []
    base = owner(obj)
    if kind != "Job" or base is None:
        return out  # (the workers' own objects are role templates, ADR 241)
    out.append((("metadata", "name"), "retag"))
    annotations = obj["spec"]["template"].get("metadata", {}).get("annotations") or {}
    if GENERATION_KEY in annotations:
        out.append((GENERATION_ANNOTATION, "generation"))
    for index, _ in enumerate(_at(obj, (*POD_SPEC, "containers"))):
        out.append(((*POD_SPEC, "containers", index, "image"), "image"))
    return out


def retagged(slots: list[Slot], *, versions: Mapping[str, Obj]) -> list[Slot]:
    """``slots`` with the fields image.tag reaches passed through its helpers."""
    first = versions[sorted(versions)[0]]
    by_path = {s.path: s for s in slots}
    out = list(slots)
    for path, helper in _targets(first):
        if below(path, by_path):
            continue  # a whole section above it is a value: leave it as it is
        inner = by_path.get(path)
        if inner is None:
            key: ValueKey = (WRAP, helper, LITERAL, str(_at(first, path)))
            out.append(Slot(path=path, values=blank(versions), key=key))
        else:
            out[out.index(inner)] = Slot(
                path=path, values=inner.values, key=(WRAP, helper, *inner.key)
            )
    return out
