"""Finds vf's shipped data folders (templates, schemas, kustomize) in a wheel or a checkout."""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
_FOLDERS = ("templates", "schemas", "kustomize")


@cache
def resource_dir(folder: str) -> Path:
    """A shipped data folder: ``vf/<folder>`` in a wheel, ``<repo>/<folder>`` in a checkout."""
    if folder not in _FOLDERS:
        raise ValueError(f"unknown resource folder {folder!r}")
    for candidate in (_PACKAGE_DIR / folder, _PACKAGE_DIR.parent.parent / folder):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"vf's {folder}/ folder is missing from this installation")


def schema_path(name: str) -> Path:
    return resource_dir("schemas") / name
