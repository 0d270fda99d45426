"""Pod spec paths the API server refuses, refused here the same way before anything starts.

A volume's ``items[].path`` must be relative and hold no ``..`` element; a volume mount's
``subPath`` likewise. A tree vf compiled never has either; a tree edited by hand might,
and a cluster would reject it at apply time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from vf.errors import Problem
from vf.textio.objects import Obj

_PROJECTED = ("configMap", "secret", "downwardAPI")


def _bad(path: str) -> str | None:
    if path.startswith("/"):
        return "must be a relative path"
    if ".." in path.split("/"):
        return "must not contain '..'"
    return None


def _item_paths(spec: Obj) -> Iterator[tuple[str, str]]:
    for v, volume in enumerate(spec.get("volumes") or []):
        for kind in _PROJECTED:
            for i, item in enumerate((volume.get(kind) or {}).get("items") or []):
                yield f"spec.volumes[{v}].{kind}.items[{i}].path", str(item.get("path", ""))
        sources = (volume.get("projected") or {}).get("sources") or []
        for s, source in enumerate(sources):
            for kind in _PROJECTED:
                for i, item in enumerate((source.get(kind) or {}).get("items") or []):
                    field = f"spec.volumes[{v}].projected.sources[{s}].{kind}.items[{i}].path"
                    yield field, str(item.get("path", ""))


def _sub_paths(spec: Obj) -> Iterator[tuple[str, str]]:
    for group in ("initContainers", "containers"):
        for c, container in enumerate(spec.get(group) or []):
            for m, mount in enumerate(container.get("volumeMounts") or []):
                if mount.get("subPath"):
                    yield f"spec.{group}[{c}].volumeMounts[{m}].subPath", str(mount["subPath"])


def invalid_paths(templates: Sequence[tuple[str, Obj]]) -> list[Problem]:
    """A problem for each ``items[].path`` or ``subPath`` the API server would refuse."""
    problems: list[Problem] = []
    for where, spec in templates:
        for field, path in [*_item_paths(spec), *_sub_paths(spec)]:
            reason = _bad(path)
            if reason is not None:
                problems.append(
                    Problem(
                        code="VF_RUN_TREE_INVALID",
                        what=f"{field}: Invalid value: {path!r}: {reason}",
                        remedy="recompile the tree with vf compile; never edit generated files",
                        where=where,
                    )
                )
    return problems
