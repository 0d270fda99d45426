"""Finds vf's shipped data folders (templates, schemas, kustomize, the worker pins) in a wheel
or a checkout."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2

_PACKAGE_DIR = Path(__file__).resolve().parent
_FOLDERS = ("templates", "schemas", "kustomize", "docker")


@cache
def resource_dir(folder: str) -> Path:
    """A shipped data folder: ``vf/<folder>`` in a wheel, ``<repo>/<folder>`` in a checkout."""
    if folder not in _FOLDERS:
        raise ValueError(f"unknown resource folder {folder!r}")
    for candidate in (_PACKAGE_DIR / folder, _PACKAGE_DIR.parent.parent / folder):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"vf's {folder}/ folder is missing from this installation")


@cache
def shipped_components() -> dict[str, list[dict[str, Any]]]:
    """Every shipped component's objects, as ``kustomize/components.json`` holds them
    (parsed when vf is built, ADR 124). Shared: callers copy before changing."""
    found: dict[str, list[dict[str, Any]]] = json.loads(
        (resource_dir("kustomize") / "components.json").read_text(encoding="utf-8")
    )
    return found


def schema_path(name: str) -> Path:
    return resource_dir("schemas") / name


def worker_pins() -> tuple[str, ...]:
    """The worker's third-party pins, ``name==version`` each: ``docker/worker-constraints.txt``
    (``vf/docker/`` in a wheel), the one list every worker image installs with."""
    text = (resource_dir("docker") / "worker-constraints.txt").read_text(encoding="utf-8")
    lines = [line.strip() for line in text.splitlines()]
    return tuple(line for line in lines if line and not line.startswith("#"))


@cache
def templates(folder: str, *, trim: bool = True) -> jinja2.Environment:
    """Jinja2 over ``templates/<folder>`` with ``[[ ]]``/``[% %]``/``[# #]`` delimiters (so
    Helm's and GitHub's ``{{ }}`` pass through), strict about undefined names, keeping
    trailing newlines (every line ending written as ``\n``, whatever the checkout has);
    ``trim`` drops the line a block tag stands on. One environment per folder and process:
    it compiles each template once."""
    import jinja2  # only the commands that render templates pay for it

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_dir("templates") / folder)),
        variable_start_string="[[",
        variable_end_string="]]",
        block_start_string="[%",
        block_end_string="%]",
        comment_start_string="[#",
        comment_end_string="#]",
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        newline_sequence="\n",
        trim_blocks=trim,
        lstrip_blocks=trim,
        autoescape=False,
    )
