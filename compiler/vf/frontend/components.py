"""``component(ref, params=…)``: a graph node implemented by a native component.

``ref`` is a descriptor file (``path/to/component.yaml``, or its folder), relative to the
graph module that calls ``component``, or the name of a component in the local cache
(``name`` or ``name:version``, looked up as ``<cache>/<name>/<version>/component.yaml``;
the cache is ``$VF_COMPONENT_CACHE``, else the user's cache folder). Registries are not
read: a component reaches the cache by being copied there.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from vf.errors import VfError, raise_if
from vf.frontend.component_descriptor import (
    build_spec,
    check_descriptor,
    check_params,
    read_descriptor,
)
from vf.frontend.params import safe_repr
from vf_runtime import AuthoringError, Node
from vf_runtime.components import component_node

CACHE_ENV = "VF_COMPONENT_CACHE"
DESCRIPTOR = "component.yaml"
_CACHED = re.compile(
    r"^(?P<name>[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)"
    r"(:(?P<version>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?\Z"
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def cache_dir() -> Path:
    """The component cache: ``$VF_COMPONENT_CACHE``, else ``<user cache>/vf/components``."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vf" / "components"


def _display(path: str) -> str:
    rel = os.path.relpath(path, os.getcwd())
    return path if rel.startswith("..") else rel


def resolve_ref(ref: object, *, base: Path, where: str) -> Path:
    """The descriptor file ``ref`` names; a named error when there is none."""
    if not isinstance(ref, str) or not ref or "\x00" in ref:
        raise VfError(
            "VF_COMPONENT_REF",
            f"component ref {safe_repr(ref)} is not a path or a cached component name",
            "pass 'path/to/component.yaml' or 'name[:version]' of a cached component",
            where,
        )
    if _SCHEME.match(ref):
        raise VfError(
            "VF_COMPONENT_REF",
            f"component ref {ref!r} names a registry; vf reads only local descriptors",
            f"copy the descriptor next to the graph, or into the cache ({CACHE_ENV}) as "
            "<name>/<version>/component.yaml",
            where,
        )
    cached = _CACHED.match(ref)
    if cached and not ref.endswith((".yaml", ".yml")):
        candidate = cache_dir() / cached["name"] / (cached["version"] or "latest") / DESCRIPTOR
    else:
        candidate = Path(ref).expanduser()
        candidate = candidate if candidate.is_absolute() else base / candidate
        if candidate.is_dir():
            candidate = candidate / DESCRIPTOR
    if not candidate.is_file():
        raise VfError(
            "VF_COMPONENT_NOT_FOUND",
            f"component {ref!r}: no descriptor at {_display(str(candidate))}",
            "pass the path of a component.yaml (relative to the graph module), or cache it as "
            f"<{CACHE_ENV}>/<name>/<version>/component.yaml",
            where,
        )
    return candidate.resolve()


def _caller() -> tuple[str, int]:
    frame = sys._getframe(2)
    return frame.f_code.co_filename, frame.f_lineno


def component(ref: str, *, params: dict[str, Any] | None = None, **options: Any) -> Node:
    """A node implemented by the native component ``ref``, configured with ``params``.

    ``options`` are the graph keywords of the component's kind (``name``, ``nb_tasks``,
    ``partition_by``, ``join_policy``, ``delivery``, ``idempotent``, ``image``); what the
    component needs (GPUs, finiteness, its image) comes from its descriptor.
    """
    file, line = _caller()
    where = f"{_display(file)}:{line}"
    path = resolve_ref(ref, base=Path(file).resolve().parent, where=where)
    label = f"component {_display(str(path))}"
    document = read_descriptor(path, where=where)
    raise_if(check_descriptor(document, label=label, where=where))
    params_json, problems = check_params(document, params, label=label, where=where)
    raise_if(problems)
    try:
        node = component_node(
            build_spec(document, directory=path.parent), params_json=params_json, options=options
        )
    except AuthoringError as exc:
        raise VfError(exc.code, str(exc), exc.remedy, where) from None
    node._vf_site = (file, line)
    return node
