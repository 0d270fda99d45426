"""Write what ``vf inventory`` saw into one environment of ``vf.yaml``, keeping the rest.

vf.yaml is the user's file, so it is edited round-trip (ruamel): comments, key order and
quoting survive, and only ``kubernetes_version``, ``gpu.inventory`` and
``gpu.device_classes`` of the chosen environment change. Unknowns are written as
``unknown`` with the reason in a comment, never as an empty value; a version that could not
be read leaves the declared one in place. The result is validated as a vf.yaml before it
replaces the file (atomically), so a failed run leaves the file as it was.
"""

from __future__ import annotations

import io
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from vf.commands.inventory.nodes import ObservedNode
from vf.commands.inventory.read import ClusterInventory
from vf.errors import VfError
from vf.ir.capabilities import Known, Unknown
from vf.textio.safe_read import Unreadable, read_regular
from vf.textio.yaml_guard import MAX_INPUT_BYTES, amplified
from vf.textio.yaml_read import reader

UNKNOWN = "unknown"
MARK = "vf inventory:"
_VERSION = re.compile(r"^1\.(2[5-9]|3[0-9])\Z")


def _yaml() -> YAML:
    yaml = reader("rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def _note(mapping: CommentedMap, key: str, text: str | None) -> None:
    """Set (or, with None, clear) vf's own end-of-line comment on ``key``."""
    token = mapping.ca.items.get(key)
    ours = token is not None and len(token) > 2 and token[2] is not None
    if ours and str(token[2].value).lstrip("# ").startswith(MARK):
        mapping.ca.items.pop(key)
    if text is not None:
        mapping.yaml_add_eol_comment(f"{MARK} {text}", key)


def _entry(node: ObservedNode) -> CommentedMap:
    entry = CommentedMap()
    entry["name"] = node.name
    entry["product"] = node.product
    entry["cards"] = node.cards
    entry["memory_gib"] = int(node.memory_gib) if node.memory_gib.is_integer() else node.memory_gib
    entry["sharing"] = node.sharing
    entry["labels"] = CommentedMap(node.labels)
    entry["allocatable"] = CommentedMap(node.allocatable)
    if node.mig_devices:
        entry["mig_devices"] = CommentedMap(node.mig_devices)
    if isinstance(node.in_use, Known):
        entry["in_use"] = CommentedMap(node.in_use.value)
    else:
        entry["in_use"] = UNKNOWN
        entry.yaml_add_eol_comment(f"{MARK} {node.in_use.reason}", "in_use")
    return entry


def apply_inventory(env: CommentedMap, inventory: ClusterInventory) -> list[str]:
    """Merge ``inventory`` into one environment mapping; returns the warnings to print."""
    warnings = list(inventory.notes)
    version = inventory.kubernetes_version
    if isinstance(version, Known) and _VERSION.match(version.value):
        env["kubernetes_version"] = version.value
        _note(env, "kubernetes_version", None)
    elif "kubernetes_version" in env:
        reason = version.reason if isinstance(version, Unknown) else f"{version.value} unsupported"
        _note(env, "kubernetes_version", f"not updated ({reason})")
    if isinstance(version, Known) and not _VERSION.match(version.value):
        warnings.append(f"Kubernetes {version.value} is outside what vf targets (1.25-1.39)")
    gpu = env.get("gpu")
    if not isinstance(gpu, CommentedMap):
        gpu = CommentedMap()
        env["gpu"] = gpu
    gpu["inventory"] = CommentedSeq([_entry(node) for node in inventory.nodes])
    left_out = sum(1 for note in inventory.notes if note.startswith("node "))
    _note(
        gpu,
        "inventory",
        f"read from context {inventory.context}"
        + (
            f"; {left_out} GPU node(s) not recorded (see the command's warnings)"
            if left_out
            else ""
        ),
    )
    classes = inventory.device_classes
    if isinstance(classes, Known):
        gpu["device_classes"] = CommentedSeq(classes.value)
        _note(gpu, "device_classes", None)
    else:
        gpu["device_classes"] = UNKNOWN
        _note(gpu, "device_classes", classes.reason)
    return warnings


def _environment(document: Any, name: str) -> CommentedMap:
    envs = document.get("environments")
    if not isinstance(envs, CommentedMap):
        envs = CommentedMap()
        document["environments"] = envs
    env = envs.get(name)
    if not isinstance(env, CommentedMap):
        env = CommentedMap()
        envs[name] = env
    return env


def _existing(yaml: YAML, path: Path) -> Any:
    """The document already at ``path`` (None when there is none), read within vf.yaml's
    bounds: a regular file of at most 1 MiB, nesting and aliases that fit its size."""
    if not os.path.lexists(path):
        return None
    text = ""
    try:
        text = read_regular(path, limit=MAX_INPUT_BYTES, follow=True).decode("utf-8")
        document = yaml.load(text)
    except (Unreadable, UnicodeDecodeError, YAMLError, RecursionError) as exc:
        why = "it nests too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise VfError(
            "VF_CONFIG_SYNTAX",
            f"{path.name} cannot be read: {why.splitlines()[0] if why else type(exc).__name__}",
            "fix the file, or pass --out to a new one",
            str(path),
        ) from None
    if document is not None and amplified(document, text_length=len(text)):
        raise VfError(
            "VF_CONFIG_ALIASES",
            f"{path.name}'s aliases (*name) expand it far beyond its own size",
            "write the repeated values out, or pass --out to a new file",
            str(path),
        )
    return document


def merged_text(
    path: Path, *, environment: str, inventory: ClusterInventory
) -> tuple[str, list[str]]:
    """The new text of ``path`` (created when missing) and the warnings."""
    yaml = _yaml()
    document = _existing(yaml, path)
    if document is None:
        document = CommentedMap()
    if not isinstance(document, CommentedMap):
        raise VfError(
            "VF_CONFIG_SCHEMA",
            f"{path.name} is not a mapping",
            "fix the file, or pass --out to a new one",
            str(path),
        )
    warnings = apply_inventory(_environment(document, environment), inventory)
    out = io.StringIO()
    yaml.dump(document, out)
    return out.getvalue(), warnings


def fragment_text(inventory: ClusterInventory) -> tuple[str, list[str]]:
    """What would be merged, as a stand-alone environment mapping (for stdout)."""
    env = CommentedMap()
    warnings = apply_inventory(env, inventory)
    out = io.StringIO()
    _yaml().dump(env, out)
    return out.getvalue(), warnings


def write_inventory(path: Path, *, environment: str, inventory: ClusterInventory) -> list[str]:
    """Merge into ``path``, validate the result as a vf.yaml, then replace the file."""
    from vf.config.targets import load_targets

    text, warnings = merged_text(path, environment=environment, inventory=inventory)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.resolve().parent))
    candidate = staging / path.name  # errors name the file as the user knows it
    try:
        candidate.write_text(text, encoding="utf-8")
        load_targets(candidate)  # a merged file that vf cannot read is never written
        if path.is_file():
            mode = path.stat().st_mode & 0o777
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        candidate.chmod(mode)
        os.replace(candidate, path)
    finally:
        candidate.unlink(missing_ok=True)
        staging.rmdir()
    return warnings
