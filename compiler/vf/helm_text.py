"""Chart text: an object's canonical YAML with its slots turned into Go template actions,
and the Jinja2 text templates (NOTES.txt, README.md) shipped in ``templates/helm/``.

Everything verbatim is escaped for Go templates, so no name, image or parameter a user
writes can inject an action into the chart.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import jinja2

from vf import yamlout
from vf.helm_slots import Slot, ValueKey
from vf.resources import resource_dir

Obj = dict[str, Any]
RELEASE_NAMESPACE: ValueKey = ("$release-namespace",)
_ITEM_HEAD = re.compile(r"^(\s*)- (.*)$")


def escape_go(text: str) -> str:
    """Text that a Go template prints back unchanged."""
    return text.replace("{{", '{{ "{{" }}')


def go_string(text: str) -> str:
    """A Go string literal (JSON's escapes are a subset of Go's for ASCII text)."""
    return json.dumps(text, ensure_ascii=True)


def values_expr(key: ValueKey) -> str:
    if key == RELEASE_NAMESPACE:
        return ".Release.Namespace"
    return "(index .Values " + " ".join(go_string(part) for part in key) + ")"


def _set(obj: Any, *, path: Sequence[str | int], value: Any) -> None:
    for part in path[:-1]:
        obj = obj[part]
    obj[path[-1]] = value


def object_template(base: Obj, *, slots: Sequence[Slot], guard: ValueKey | None) -> str:
    """The template file of one object: ``base`` with a Go action at every slot."""
    skeleton = copy.deepcopy(base)
    nonce = hashlib.sha256(yamlout.dump(base).encode()).hexdigest()[:10]
    markers = {f"__vf_slot_{nonce}_{i}__": slot for i, slot in enumerate(slots)}
    for marker, marked in markers.items():
        _set(skeleton, path=marked.path, value=marker)
    lines = escape_go(yamlout.dump(skeleton)).splitlines()
    out: list[str] = []
    found = 0
    for line in lines:
        head, _, tail = line.rpartition(" ")
        slot = markers.get(tail)
        if slot is None:
            out.append(line)
            continue
        found += 1
        out.extend(_slot_lines(head + " ", slot=slot))
    if found != len(markers) or any(m in "\n".join(out) for m in markers):
        raise AssertionError("a chart slot marker was lost or duplicated")
    if guard is not None:
        out = ["{{- if " + values_expr(guard) + " }}", *out, "{{- end }}"]
    return "\n".join(out) + "\n"


def _slot_lines(prefix: str, *, slot: Slot) -> list[str]:
    expr = values_expr(slot.key)
    action = "{{ toJson " + expr + " }}"
    if not slot.optional:
        return [prefix + action]
    start = '{{- if not (kindIs "invalid" ' + expr + ") }}"
    item = _ITEM_HEAD.match(prefix)
    if item is not None and item.group(2):
        indent = item.group(1)
        return [f"{indent}-", start, f"{indent}  {item.group(2)}{action}", "{{- end }}"]
    return [start, prefix + action, "{{- end }}"]


@cache
def _jinja() -> jinja2.Environment:
    """Jinja2 with ``[[ ]]``/``[% %]`` delimiters, so Helm's ``{{ }}`` passes through."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resource_dir("templates") / "helm")),
        variable_start_string="[[",
        variable_end_string="]]",
        block_start_string="[%",
        block_end_string="%]",
        comment_start_string="[#",
        comment_end_string="#]",
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["go"] = escape_go
    return env


def render_text(name: str, *, context: Mapping[str, Any]) -> str:
    """One shipped text template (``templates/helm/<name>.j2``) rendered with ``context``."""
    return _jinja().get_template(f"{name}.j2").render(**context)
