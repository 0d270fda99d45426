"""Checkers of our own for the diagrams vf writes, run everywhere, real Graphviz or not.

Mermaid, as GitHub's renderer parses a ``flowchart`` (mermaid.js.org/syntax/flowchart.html
and its config schema, mermaid.js.org/config/schema-docs/config.html):

1. A node id is a bare word; ids are matched case-sensitively. The word ``end`` in lower
   case breaks a flowchart, and ``graph``, ``flowchart``, ``subgraph``, ``direction``,
   ``class``, ``classDef``, ``style``, ``linkStyle``, ``click``, ``call``, ``href`` are
   statements. An id starting with ``o`` or ``x`` right after a link operator (``A---oB``)
   is read as a circle or cross edge. We require ``[A-Za-z_][A-Za-z0-9_]*``, none of those
   words, no leading ``o``/``x``.
2. Text with punctuation, Unicode or spaces must be quoted: ``id["text"]``, and an edge
   label ``-->|"text"|``. A quoted string ends at the next ``"``, so a label holds no ``"``
   and no line break; other characters are written as entity codes ``#quot;`` / ``#35;``,
   and a ``#`` that starts no entity code is misread, so every ``#`` must start one.
3. A label that starts with a backtick inside the quotes is a Markdown string; labels are
   HTML (``htmlLabels``), sanitised by GitHub: we allow ``<br/>`` as the only tag and no
   raw ``<``, ``>`` or ``&`` otherwise. ``%%`` starts a comment and ``;`` ends a statement,
   so neither appears raw; ``|`` would end an edge label.
4. ``linkStyle N`` counts edges from 0 in the order they are declared; every index must
   name an edge. ``class ids name`` needs a ``classDef name``; ids must be declared nodes.
5. GitHub refuses a diagram over ``maxTextSize`` (50000 characters) or ``maxEdges`` (500).

DOT (graphviz.org/doc/info/lang.html): an ID is ``[A-Za-z_][A-Za-z0-9_]*`` (not starting
with a digit) or a double-quoted string in which ``\\"`` is the only escaped quote; the
keywords ``node``, ``edge``, ``graph``, ``digraph``, ``subgraph``, ``strict`` are reserved
in any case; a backslash in an escString starts an escape (``\\n``, ``\\l``, ``\\N``…), so a
literal one is ``\\\\``.
"""

from __future__ import annotations

import html
import re

MERMAID_KEYWORDS = frozenset(
    {
        "end", "graph", "flowchart", "subgraph", "direction", "class", "classdef", "style",
        "linkstyle", "click", "call", "href", "default",
    }
)  # fmt: skip
DOT_KEYWORDS = frozenset({"node", "edge", "graph", "digraph", "subgraph", "strict"})
ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ENTITY = re.compile(r"#(?:[0-9]+|[a-z]+);")
_SHAPES = (('(["', '"])'), ('[/"', '"/]'), ('[["', '"]]'), ('["', '"]'))
_EDGE = re.compile(r'^  (\S+) (-->|-\.->)\|"(.*)"\| (\S+)$')
_NODE = re.compile(r"^  ([^\s\[\(]+)(.*)$")
_CLASSDEF = re.compile(r"^  classDef ([A-Za-z_]\w*) [a-z:#0-9,\-]+$")
_CLASS = re.compile(r"^  class ([A-Za-z0-9_,]+) ([A-Za-z_]\w*)$")
_LINKSTYLE = re.compile(r"^  linkStyle ([0-9,]+) [a-z:#0-9,\-]+$")
MAX_TEXT = 50_000
MAX_EDGES = 500


def check_mermaid_id(node_id: str) -> None:
    assert ID.match(node_id), f"id {node_id!r} is not a bare word"
    assert node_id.lower() not in MERMAID_KEYWORDS, f"id {node_id!r} is a keyword"
    assert node_id[0] not in "ox", f"id {node_id!r} reads as a circle/cross edge"


def mermaid_label(text: str) -> list[str]:
    """The lines a quoted label shows, after checking it obeys rules 2 and 3."""
    assert text and not text.startswith("`"), f"label {text!r} is empty or Markdown"
    assert not any(c in text for c in '"\n\r`|'), f"raw quote, break or bar in {text!r}"
    assert "%%" not in text
    bare = _ENTITY.sub("", text.replace("<br/>", ""))
    for char in "#<>&;":
        assert char not in bare, f"raw {char!r} in label {text!r}"
    assert all(c.isprintable() for c in bare), f"unprintable character in {text!r}"
    return [_decode(line) for line in text.split("<br/>")]


def _entity(match: re.Match[str]) -> str:
    code = match.group(1)
    return f"&#{code};" if code.isdigit() else f"&{code};"


def _decode(text: str) -> str:
    return html.unescape(re.sub(r"#([0-9]+|[a-z]+);", _entity, text))


def _node(line: str) -> tuple[str, list[str]]:
    match = _NODE.match(line)
    assert match, f"not a node statement: {line!r}"
    node_id, rest = match.groups()
    for head, tail in _SHAPES:
        if rest.startswith(head) and rest.endswith(tail):
            return node_id, mermaid_label(rest[len(head) : -len(tail)])
    raise AssertionError(f"unknown shape or unquoted label: {line!r}")


def check_mermaid(text: str) -> dict[str, list[str]]:
    """Check a vf Mermaid flowchart against rules 1-5; return each node's label lines."""
    assert len(text) <= MAX_TEXT and text.endswith("\n") and "\r" not in text
    lines = text[:-1].split("\n")
    assert lines[0] == "flowchart LR", lines[0]
    nodes: dict[str, list[str]] = {}
    edges, classes, used_classes, link_indices = 0, set(), set(), []
    for line in lines[1:]:
        if edge := _EDGE.match(line):
            source, _, label, target = edge.groups()
            assert source in nodes and target in nodes, f"edge to an undeclared node: {line!r}"
            mermaid_label(label)
            edges += 1
        elif classdef := _CLASSDEF.match(line):
            classes.add(classdef.group(1))
        elif cls := _CLASS.match(line):
            members, name = cls.groups()
            assert all(m in nodes for m in members.split(",")), line
            used_classes.add(name)
        elif style := _LINKSTYLE.match(line):
            link_indices += [int(i) for i in style.group(1).split(",")]
        else:
            node_id, label = _node(line)
            check_mermaid_id(node_id)
            assert node_id not in nodes, f"node {node_id!r} declared twice"
            assert edges == 0, "nodes are declared before edges"
            nodes[node_id] = label
    assert edges <= MAX_EDGES
    assert used_classes <= classes, "class without classDef"
    assert all(0 <= i < edges for i in link_indices), "linkStyle index names no edge"
    return nodes


_DOT_STRING = r'"(?:[^"\\\n]|\\.)*"'
_DOT_ATTRS = rf"\[((?:[a-z]+=(?:{_DOT_STRING}|[A-Za-z0-9_.]+)(?:, )?)+)\];"
_DOT_NODE = re.compile(rf"^  ([A-Za-z_][A-Za-z0-9_]*) {_DOT_ATTRS}$")
_DOT_EDGE = re.compile(rf"^  ([A-Za-z_][A-Za-z0-9_]*) -> ([A-Za-z_][A-Za-z0-9_]*) {_DOT_ATTRS}$")
_DOT_SETTING = re.compile(
    rf"^  (?:[a-z]+=(?:{_DOT_STRING}|[A-Za-z0-9_]+);|(?:node|edge) {_DOT_ATTRS})$"
)


def dot_label(quoted: str) -> list[str]:
    """The lines of a DOT label: only ``\\\\``, ``\\"`` and our ``\\n`` line breaks."""
    out, chars = [], iter(quoted[1:-1])
    for char in chars:
        if char == "\\":
            escaped = next(chars)
            assert escaped in '\\"n', f"escape \\{escaped} in {quoted!r}"
            out.append("\n" if escaped == "n" else escaped)
        else:
            assert char not in '"\n', quoted
            out.append(char)
    return "".join(out).split("\n")


def check_dot(text: str) -> dict[str, list[str]]:
    """Check a vf DOT digraph line by line; return each node's label lines."""
    lines = text.rstrip("\n").split("\n")
    assert lines[0] == "digraph vf {" and lines[-1] == "}"
    nodes: dict[str, list[str]] = {}
    for line in lines[1:-1]:
        if _DOT_SETTING.match(line):
            continue
        if edge := _DOT_EDGE.match(line):
            assert edge.group(1) in nodes and edge.group(2) in nodes, line
            continue
        node = _DOT_NODE.match(line)
        assert node, f"not a DOT statement vf writes: {line!r}"
        node_id = node.group(1)
        assert node_id.lower() not in DOT_KEYWORDS, node_id
        assert node_id not in nodes, f"node {node_id!r} declared twice"
        label = re.match(rf"label=({_DOT_STRING})", node.group(2))
        assert label, line
        nodes[node_id] = dot_label(label.group(1))
    return nodes
