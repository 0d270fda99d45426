"""Write a ``Diagram`` as Mermaid (GitHub and GitLab Markdown) or DOT (Graphviz).

Node ids are generated (``n0``, ``n1``, … in box order), never taken from node names, so
no name can collide with a keyword or an edge operator. Every label is quoted, and each
character the grammar gives a meaning to is written as an entity code (Mermaid) or a
backslash escape (DOT); characters that cannot be printed are shown as ``\\uXXXX``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection
from dataclasses import dataclass

from vf.render.diagram import Arrow, Box, Diagram

# Characters Mermaid reads as syntax, markup or an entity inside a quoted label.
_MERMAID_ENTITIES = {c: f"#{ord(c)};" for c in '"#&<>;%|`\\'}
_SHAPES = {"producer": ('(["', '"])'), "consumer": ('[/"', '"/]')}
_NATIVE_SHAPE = ('[["', '"]]')
_PLAIN_SHAPE = ('["', '"]')
CHANGED_STYLE = "fill:#fff4d6,stroke:#d97706,stroke-width:3px"
ADDED_STYLE = "fill:#e6f6e6,stroke:#15803d,stroke-width:3px"
_VERDICT_STYLE = {"warning": "stroke:#d97706,stroke-width:2px", "rejected": "stroke:#dc2626"}
_DOT_VERDICT = {"warning": 'color="#d97706"', "rejected": 'color="#dc2626"'}


@dataclass(frozen=True, kw_only=True)
class Highlight:
    """Boxes and arrows to draw as added or changed (``vf diff``); arrows by (source, target)."""

    added: frozenset[str] = frozenset()
    changed: frozenset[str] = frozenset()
    arrows: frozenset[tuple[str, str]] = frozenset()


NO_HIGHLIGHT = Highlight()


def printable(text: str) -> str:
    """``text`` with every control, format, separator or surrogate character as ``\\uXXXX``."""
    out = []
    for char in text:
        category = unicodedata.category(char)
        if category[0] == "C" or category in ("Zl", "Zp") or (char.isspace() and char != " "):
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)


def mermaid_text(text: str) -> str:
    """``text`` safe inside a double-quoted Mermaid label."""
    return "".join(_MERMAID_ENTITIES.get(c, c) for c in printable(text))


def dot_text(text: str) -> str:
    """``text`` safe inside a double-quoted DOT string (backslash escapes are literal)."""
    return printable(text).replace("\\", "\\\\").replace('"', '\\"')


def _ids(diagram: Diagram) -> dict[str, str]:
    return {box.node: f"n{i}" for i, box in enumerate(diagram.boxes)}


def _mermaid_box(box: Box, node_id: str) -> str:
    head, tail = _NATIVE_SHAPE if box.native else _SHAPES.get(box.kind, _PLAIN_SHAPE)
    label = "<br/>".join(mermaid_text(line) for line in (box.node, *box.facts))
    return f"  {node_id}{head}{label}{tail}"


def _arrow_label(arrow: Arrow) -> list[str]:
    return [arrow.label, *([f"⚠ {arrow.note}"] if arrow.note else [])]


def _mermaid_arrow(arrow: Arrow, ids: dict[str, str]) -> str:
    link = "-.->" if arrow.verdict is not None else "-->"
    label = "<br/>".join(mermaid_text(line) for line in _arrow_label(arrow))
    return f'  {ids[arrow.source]} {link}|"{label}"| {ids[arrow.target]}'


def mermaid(diagram: Diagram, *, highlight: Highlight = NO_HIGHLIGHT) -> str:
    """A Mermaid ``flowchart LR`` of the diagram, changed parts styled (one trailing LF)."""
    ids = _ids(diagram)
    lines = ["flowchart LR"]
    lines += [_mermaid_box(box, ids[box.node]) for box in diagram.boxes]
    lines += [_mermaid_arrow(arrow, ids) for arrow in diagram.arrows]
    lines += _mermaid_styles(diagram, ids=ids, highlight=highlight)
    return "\n".join(lines) + "\n"


def _mermaid_styles(diagram: Diagram, *, ids: dict[str, str], highlight: Highlight) -> list[str]:
    lines = []
    for name, style, members in (
        ("added", ADDED_STYLE, highlight.added),
        ("changed", CHANGED_STYLE, highlight.changed - highlight.added),
    ):
        chosen = [ids[b.node] for b in diagram.boxes if b.node in members]
        if chosen:
            lines += [f"  classDef {name} {style}", f"  class {','.join(chosen)} {name}"]
    by_style: dict[str, list[str]] = {}
    for index, arrow in enumerate(diagram.arrows):
        if (arrow.source, arrow.target) in highlight.arrows:
            by_style.setdefault("stroke:#d97706,stroke-width:4px", []).append(str(index))
        elif arrow.verdict is not None:
            by_style.setdefault(_VERDICT_STYLE[arrow.verdict], []).append(str(index))
    lines += [f"  linkStyle {','.join(idx)} {style}" for style, idx in sorted(by_style.items())]
    return lines


def _dot_box(box: Box, node_id: str, highlight: Highlight) -> str:
    label = "\\n".join(dot_text(line) for line in (box.node, *box.facts))
    shape = "component" if box.native else "box"
    attrs = [f'label="{label}"', f"shape={shape}"]
    if box.kind == "producer" and not box.native:
        attrs.append('style="rounded"')
    if box.node in highlight.added:
        attrs.append('color="#15803d", penwidth=3')
    elif box.node in highlight.changed:
        attrs.append('color="#d97706", penwidth=3')
    return f"  {node_id} [{', '.join(attrs)}];"


def _dot_arrow(arrow: Arrow, ids: dict[str, str], changed: Collection[tuple[str, str]]) -> str:
    label = "\\n".join(dot_text(line) for line in _arrow_label(arrow))
    attrs = [f'label="{label}"']
    if arrow.verdict is not None:
        attrs += ["style=dashed", _DOT_VERDICT[arrow.verdict]]
    if (arrow.source, arrow.target) in changed:
        attrs.append("penwidth=3")
    return f"  {ids[arrow.source]} -> {ids[arrow.target]} [{', '.join(attrs)}];"


def dot(diagram: Diagram, *, highlight: Highlight = NO_HIGHLIGHT) -> str:
    """A Graphviz ``digraph`` of the diagram (one trailing LF)."""
    ids = _ids(diagram)
    title = dot_text(f"vf flow {diagram.flow_id} ({diagram.flow_type})")
    lines = [
        "digraph vf {",
        "  rankdir=LR;",
        f'  label="{title}";',
        '  node [fontname="Helvetica", fontsize=11];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]
    lines += [_dot_box(box, ids[box.node], highlight) for box in diagram.boxes]
    lines += [_dot_arrow(arrow, ids, highlight.arrows) for arrow in diagram.arrows]
    lines.append("}")
    return "\n".join(lines) + "\n"
