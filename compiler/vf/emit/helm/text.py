"""Chart text: an object's canonical YAML with its slots turned into Go template actions,
and the text templates (NOTES.txt, README.md) shipped in ``templates/helm/``.

Everything verbatim is escaped for Go templates, so no name, image or parameter a user
writes can inject an action into the chart.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vf.emit.helm.slots import TOPOLOGY, Slot, ValueKey
from vf.resources import templates
from vf.textio import yamlout
from vf.textio.objects import Obj

RELEASE_NAMESPACE: ValueKey = ("$release-namespace",)
# Keys starting with "$" are not values: they name what Helm itself knows.
IN_RELEASE_NAMESPACE = "$in-release-namespace"  # (it, head, tail): head.<ns>.svc tail
TEMPLATED = "$tpl"  # ("$tpl", *key): the value at key, rendered with the release (tpl)
WRAP = "$wrap"  # ("$wrap", helper, *inner): inner through vf.<helper> with image.tag
# What a Job's name and a BATCH generation follow (vf.jobKey): image.tag and every pod
# override, computed once per template file (it reads every node's values).
JOB_KEY = "$jobKey"
_JOB_KEY_LINE = "{{- " + JOB_KEY + ' := include "vf.jobKey" $.Values }}\n'
LITERAL = "$lit"  # ("$lit", text): text as it is
ROW = "$row"  # ("$row", RowPart): a field of the row a generic template ranges over
NB_TASKS_KEY = "$nb-tasks"  # ("$nb-tasks", node): nodes.<node>.replicas as text
GEN_NAME = "$gen-name"  # ("$gen-name", prefix): the prefix and the BATCH generation
POD = "$pod"  # ("$pod", name, mode, node, *have): a pod override (vf.emit.helm.overrides)
POD_WHOLE = frozenset({"map", "list", "scalar"})  # modes that write the whole field
HELM_CHART_LABEL: ValueKey = ("$helm-chart",)
RELEASE_SERVICE: ValueKey = ("$release-service",)
_BUILT_IN = {
    RELEASE_NAMESPACE: "$.Release.Namespace",
    # the chart's name without its version: a version counts every environment's change, and
    # an object of another environment must not change with it (ADR 176)
    HELM_CHART_LABEL: "$.Chart.Name",
    RELEASE_SERVICE: "$.Release.Service",
}
_encode_ascii = json.encoder.encode_basestring_ascii  # json.dumps(text) of a str, in C
_ITEM_HEAD = re.compile(r"^(\s*)- (.*)$")


class RowPart(str):
    """A part of a value key that a generic template reads from its row: the field's name
    (the text of the str), between a constant ``prefix`` and ``suffix``."""

    prefix: str
    suffix: str

    def __new__(cls, field: str, prefix: str = "", suffix: str = "") -> RowPart:
        part = super().__new__(cls, field)
        part.prefix, part.suffix = prefix, suffix
        return part


def escape_go(text: str) -> str:
    """Text that a Go template prints back unchanged."""
    return text.replace("{{", '{{ "{{" }}')


def go_string(text: str) -> str:
    """A Go string literal (JSON's escapes are a subset of Go's for ASCII text)."""
    return _encode_ascii(text)


def _part(part: str) -> str:
    """A value key's part as a Go expression: a string, or a field of the current row."""
    if not isinstance(part, RowPart):
        return go_string(part)
    field = f"(index $r {go_string(str(part))})"
    if not (part.prefix or part.suffix):
        return field
    texts = [go_string(part.prefix)] if part.prefix else []
    texts.append(field)
    texts += [go_string(part.suffix)] if part.suffix else []
    return f"(print {' '.join(texts)})"


def _replicas(node: str) -> str:
    return f"(toString (index $.Values {_part('nodes')} {_part(node)} {_part('replicas')}))"


def _topology(key: ValueKey) -> str:
    """A provision topology shard: its text with each node's count from the values."""
    parts = [_part(part) if i % 2 == 0 else _replicas(part) for i, part in enumerate(key[1:])]
    return f"(print {' '.join(parts)})"


_FROM_REPLICAS: dict[str, Callable[[ValueKey], str]] = {
    NB_TASKS_KEY: lambda key: _replicas(key[1]),
    TOPOLOGY: _topology,
}


def _derived(key: ValueKey) -> str | None:
    """The expression of a value made of others: a name in the release's namespace, or
    what a worker's replica count decides (``vf.emit.helm.replicas``)."""
    if key[0] == IN_RELEASE_NAMESPACE:
        head, tail = (_part(part) for part in key[1:])
        return f'(printf "%s.%s.svc%s" {head} $.Release.Namespace {tail})'
    simple = _FROM_REPLICAS.get(key[0])
    if simple is not None:  # what one node's replica count decides
        return simple(key)
    if key[0] == GEN_NAME:
        return f"(print {_part(key[1])} (index $.Values {_part('generation')}))"
    return None


def values_expr(key: ValueKey) -> str:
    """The Go expression of a value key, valid at any depth of a template (``$`` is the
    chart's root even inside a ``range``)."""
    if key in _BUILT_IN:
        return _BUILT_IN[key]
    if key[0] in (ROW, LITERAL):
        return _part(key[1])
    if key[0] == TEMPLATED:
        return f"(tpl {values_expr(key[1:])} $)"
    if key[0] == WRAP:
        follows = "$.Values.image.tag" if key[1] == "image" else JOB_KEY
        return f'(include "vf.{key[1]}" (list {values_expr(key[2:])} {follows}))'
    derived = _derived(key)
    if derived is not None:
        return derived
    return "(index $.Values " + " ".join(_part(part) for part in key) + ")"


def values_key(key: ValueKey) -> ValueKey | None:
    """Where in the values a slot's per-environment values go; None for what Helm or the
    template itself supplies."""
    if key[0] == TEMPLATED:
        return values_key(key[1:])
    if key[0] == WRAP:
        return values_key(key[2:])
    if key[0] == NB_TASKS_KEY:
        return ("nodes", key[1], "replicas")
    if key[0] == POD:  # vf's own value at the field, when it differs by environment
        return values_key(key[4:]) if key[2] in POD_WHOLE and len(key) > 4 else None
    return None if key[0].startswith("$") else key


def job_keyed(text: str) -> str:
    """A template file's text with ``$jobKey`` defined at its top, when it uses it."""
    return _JOB_KEY_LINE + text if JOB_KEY in text else text


def object_template(base: Obj, *, slots: Sequence[Slot], guard: str | None) -> str:
    """The template text of one object: ``base`` with a Go action at every slot, inside
    ``{{ if guard }}`` when a condition is given."""
    markers, text = _marked_text(base, slots=slots)
    out: list[str] = []
    done = 0
    for at, marker in sorted((text.find(m), m) for m in markers):
        start, end = text.rfind("\n", 0, at) + 1, at + len(marker)
        if at < 1 or text[at - 1] != " " or text[end : end + 1] != "\n":
            raise AssertionError("a chart slot marker is not a whole value")
        out.append(text[done:start])
        out.extend(line + "\n" for line in _slot_lines(text[start:at], slot=markers[marker]))
        done = end + 1
    out.append(text[done:])
    if guard is not None:
        out = ["{{- if " + guard + " }}\n", *out, "{{- end }}\n"]
    return "".join(out)


def _marked_text(base: Obj, *, slots: Sequence[Slot]) -> tuple[dict[str, Slot], str]:
    """The escaped YAML text of ``base`` with a unique marker in place of each slot's value.

    The first nonce whose marker prefix occurs nowhere else in the text is taken, so no
    string of the user's can pass for a marker; the markers never reach the output.
    """
    for nonce in itertools.count():
        prefix = f"__vf_slot_{nonce}_"
        markers = {f"{prefix}{i}__": slot for i, slot in enumerate(slots)}
        text = escape_go(yamlout.dump(_skeleton(base, markers=markers)))
        if text.count(prefix) == len(markers):
            return markers, text
    raise AssertionError("unreachable")  # pragma: no cover


def _skeleton(base: Obj, *, markers: Mapping[str, Slot]) -> Obj:
    """``base`` with each marker at its slot's path; only the containers on the way are
    copied, everything else is shared with ``base`` (which stays unchanged)."""
    root: Obj = dict(base)
    fresh = {id(root)}
    for marker, slot in markers.items():
        node: Any = root
        for part in slot.path[:-1]:
            child = node[part]
            if id(child) not in fresh:
                child = copy.copy(child)
                fresh.add(id(child))
                node[part] = child
            node = child
        node[slot.path[-1]] = marker
    return root


def _pod_lines(prefix: str, *, key: ValueKey) -> list[str]:
    """The lines of a pod override: the whole field, the user's keys beside vf's own in a
    map, or the user's items after vf's own in a list (``vf.pod`` in ``_helpers.tpl``)."""
    name, mode, node = key[1:4]
    indent = prefix[: len(prefix) - len(prefix.lstrip(" "))]
    if mode == "extra":
        own = key[4]
        call = f"(list $.Values {go_string(name)} {_part(node)} nil {go_string(mode)} {_part(own)})"
        return [
            '{{- range $vfk, $vfv := (include "vf.pod" ' + call + " | fromJson) }}",
            indent + "{{ toJson $vfk }}: {{ toJson $vfv }}",
            "{{- end }}",
        ]
    if mode == "append":
        call = f'(list $.Values {go_string(name)} {_part(node)} nil {go_string(mode)} "")'
        return [
            '{{- range (include "vf.pod" ' + call + " | fromJsonArray) }}",
            indent + "- {{ toJson . }}",
            "{{- end }}",
        ]
    have = values_expr(key[4:]) if len(key) > 4 else "nil"
    call = f'(list $.Values {go_string(name)} {_part(node)} {have} {go_string(mode)} "")'
    return ['{{- with (include "vf.pod" ' + call + ") }}", prefix + "{{ . }}", "{{- end }}"]


def _slot_lines(prefix: str, *, slot: Slot) -> list[str]:
    if slot.key[0] == POD:
        return _pod_lines(prefix, key=slot.key)
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


def render_text(name: str, *, context: Mapping[str, Any]) -> str:
    """One shipped text template (``templates/helm/<name>.j2``) rendered with ``context``;
    ``|go`` escapes user text for Go templates, so Helm's ``{{ }}`` passes through."""
    environment = templates("helm")
    environment.filters["go"] = escape_go
    return environment.get_template(f"{name}.j2").render(context)
