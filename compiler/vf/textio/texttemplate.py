"""vf's own text templates (``templates/helm``, ``templates/tree``), rendered without Jinja2.

Every compile writes the tree's README and the chart's README, NOTES.txt and helpers from
these templates. They are written in a small subset of Jinja2, with vf's delimiters and
Jinja2's ``trim_blocks``, ``lstrip_blocks`` and ``keep_trailing_newline``, and this module
renders that subset to the text Jinja2 renders (a test holds the two equal on every
shipped template), so a compile does not import Jinja2 (ADR 0134). The subset:

- ``[[ expr ]]`` writes ``str()`` of the value; ``[# … #]`` is a comment;
- ``[% if expr %] … [% else %] … [% endif %]``;
- ``[% for a in expr %] … [% endfor %]`` and ``[% for a, b in expr %] … [% endfor %]``;
- ``expr`` is ``[not] name[.key …][|filter[("text")] …][ OP integer]``, with the filters
  ``length``, ``join("text")`` and those the caller gives, and OP one of
  ``< <= > >= == !=``; ``.key`` reads a mapping's item (or an attribute).

Anything else, or a name the context lacks, is a ValueError naming the template and tag:
the templates ship with vf, so that is a bug in vf, found by its tests.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from vf.resources import resource_dir

Filter = Callable[..., Any]
_TAG = re.compile(r"\[\[.*?\]\]|\[%.*?%\]|\[#.*?#\]", re.S)
_EXPR = re.compile(
    r"\s*(?P<not>not\s+)?(?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)"
    r"(?P<filters>(?:\s*\|\s*\w+(?:\(\s*(?:\"[^\"]*\"|'[^']*')\s*\))?)*)"
    r"\s*(?:(?P<op><=|>=|==|!=|<|>)\s*(?P<number>-?\d+))?\s*"
)
_FILTER = re.compile(r"\|\s*(\w+)(?:\(\s*(\"[^\"]*\"|'[^']*')\s*\))?")
_FOR = re.compile(r"for\s+(\w+(?:\s*,\s*\w+)*)\s+in\s+(.+)", re.S)
_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
_BUILT_IN: dict[str, Filter] = {
    "length": len,
    "join": lambda value, sep="": sep.join(str(v) for v in value),
}


@dataclass(frozen=True)
class _Expr:
    source: str
    negate: bool
    path: tuple[str, ...]
    filters: tuple[tuple[str, tuple[str, ...]], ...]
    compare: tuple[Callable[[Any, Any], bool], int] | None


@dataclass(frozen=True)
class _Output:
    expr: _Expr


@dataclass(frozen=True)
class _If:
    expr: _Expr
    then: tuple[Node, ...]
    otherwise: tuple[Node, ...]


@dataclass(frozen=True)
class _For:
    names: tuple[str, ...]
    expr: _Expr
    body: tuple[Node, ...]


Node = str | _Output | _If | _For


@dataclass(frozen=True)
class TextTemplate:
    """One parsed template; ``render`` is pure."""

    name: str
    nodes: tuple[Node, ...]

    def render(
        self, context: Mapping[str, Any], *, filters: Mapping[str, Filter] | None = None
    ) -> str:
        out: list[str] = []
        renderer = _Renderer(name=self.name, filters={**_BUILT_IN, **(filters or {})})
        renderer.run(self.nodes, context, out)
        return "".join(out)


@cache
def shipped(folder: str, name: str) -> TextTemplate:
    """``templates/<folder>/<name>.j2`` as shipped with vf, parsed once."""
    path = resource_dir("templates") / folder / f"{name}.j2"
    return parse(path.read_text(encoding="utf-8"), name=f"{folder}/{name}")


def parse(source: str, *, name: str) -> TextTemplate:
    """A template's text parsed once; a tag outside the subset is a ValueError."""
    stack: list[tuple[str, list[Node], Any]] = [("", [], None)]
    for piece in _pieces(source):
        if isinstance(piece, str):
            stack[-1][1].append(piece)
            continue
        kind, body = piece
        if kind == "[[":
            stack[-1][1].append(_Output(_expr(body, name=name)))
        elif kind == "[%":
            _block(body, stack=stack, name=name)
    if len(stack) != 1:
        raise ValueError(f"template {name}: [% {stack[-1][0]} %] is never closed")
    return TextTemplate(name=name, nodes=tuple(stack[0][1]))


def _pieces(source: str) -> list[str | tuple[str, str]]:
    """Text and tags, with Jinja2's whitespace rules for block and comment tags: the
    spaces before one that starts its line go, and so does one newline right after it."""
    out: list[str | tuple[str, str]] = []
    pos, line_starting = 0, True
    for match in _TAG.finditer(source):
        text, tag, end = source[pos : match.start()], match.group(), match.end()
        block = tag[:2] in ("[%", "[#")
        if block:
            start = text.rfind("\n") + 1
            if (start > 0 or line_starting) and text[start:].isspace():
                text = text[:start]
            if source.startswith("\n", end):
                end += 1
        if text:
            out.append(text)
        if tag[:2] != "[#":
            out.append((tag[:2], tag[2:-2].strip()))
        pos, line_starting = end, block and source[end - 1 : end] == "\n"
    if source[pos:]:
        out.append(source[pos:])
    return out


def _block(body: str, *, stack: list[tuple[str, list[Node], Any]], name: str) -> None:
    word = body.split(None, 1)[0] if body else ""
    if word == "if":
        stack.append(("if", [], [_expr(body[2:], name=name), None]))
    elif word == "for":
        found = _FOR.fullmatch(body)
        if found is None:
            raise ValueError(f"template {name}: cannot read [% {body} %]")
        names = tuple(n.strip() for n in found.group(1).split(","))
        stack.append(("for", [], [names, _expr(found.group(2), name=name)]))
    elif word == "else" and body == "else" and stack[-1][0] == "if" and stack[-1][2][1] is None:
        opened, nodes, info = stack.pop()
        info[1] = tuple(nodes)
        stack.append((opened, [], info))
    elif body in ("endif", "endfor") and stack[-1][0] == body[3:]:
        _close(stack)
    else:
        raise ValueError(f"template {name}: [% {body} %] is not in vf's template subset here")


def _close(stack: list[tuple[str, list[Node], Any]]) -> None:
    opened, nodes, info = stack.pop()
    node: Node
    if opened == "if":
        expr, then = info
        node = (
            _If(expr, then=then, otherwise=tuple(nodes))
            if then is not None
            else _If(expr, then=tuple(nodes), otherwise=())
        )
    else:
        node = _For(names=info[0], expr=info[1], body=tuple(nodes))
    stack[-1][1].append(node)


def _expr(text: str, *, name: str) -> _Expr:
    found = _EXPR.fullmatch(text)
    if found is None:
        raise ValueError(f"template {name}: cannot read the expression {text.strip()!r}")
    filters = tuple(
        (fname, (quoted[1:-1],) if quoted else ())
        for fname, quoted in _FILTER.findall(found.group("filters"))
    )
    op = found.group("op")
    compare = (_OPS[op], int(found.group("number"))) if op else None
    return _Expr(
        source=text.strip(),
        negate=bool(found.group("not")),
        path=tuple(found.group("name").split(".")),
        filters=filters,
        compare=compare,
    )


@dataclass(frozen=True)
class _Renderer:
    name: str
    filters: Mapping[str, Filter]

    def run(self, nodes: Sequence[Node], context: Mapping[str, Any], out: list[str]) -> None:
        for node in nodes:
            if isinstance(node, str):
                out.append(node)
            elif isinstance(node, _Output):
                out.append(str(self.value(node.expr, context)))
            elif isinstance(node, _If):
                chosen = node.then if self.value(node.expr, context) else node.otherwise
                self.run(chosen, context, out)
            else:
                for item in self.value(node.expr, context):
                    self.run(node.body, {**context, **self.bind(node, item)}, out)

    def bind(self, node: _For, item: Any) -> dict[str, Any]:
        if len(node.names) == 1:
            return {node.names[0]: item}
        values = tuple(item)
        if len(values) != len(node.names):
            raise ValueError(f"template {self.name}: cannot unpack {item!r} into {node.names}")
        return dict(zip(node.names, values, strict=True))

    def value(self, expr: _Expr, context: Mapping[str, Any]) -> Any:
        head, *rest = expr.path
        if head not in context:
            raise ValueError(f"template {self.name}: {head!r} is undefined ({expr.source})")
        value = context[head]
        for key in rest:
            value = value[key] if isinstance(value, Mapping) else getattr(value, key)
        for fname, args in expr.filters:
            if fname not in self.filters:
                raise ValueError(f"template {self.name}: no filter {fname!r} ({expr.source})")
            value = self.filters[fname](value, *args)
        if expr.compare is not None:
            value = expr.compare[0](value, expr.compare[1])
        return not value if expr.negate else value
