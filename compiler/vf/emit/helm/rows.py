"""Generic chart templates: objects of one shape share one template that ranges over rows.

Two objects have one shape when their templates differ only in scalar values (and in the
parts of value keys that name them, such as the node in ``nodes.<node>.image``): the same
kind, fields, list lengths and slots. Such objects are one template under
``templates/rows/`` that ranges over ``rows.<shape>`` in ``values.yaml``; each row holds
what differs between them, and a field that differs in the same way for every object (the
node's name as a label, a key and a name part) is one column. The chart then grows by a row
per object instead of a template, which keeps a release of thousands of nodes inside Helm's
release Secret (ADR 87).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vf.emit.helm.slots import Slot, ValueKey
from vf.emit.helm.text import ROW, WRAP, RowPart, go_string, object_template, values_expr

Obj = dict[str, Any]
Path = tuple[str | int, ...]
Key = tuple[str, str]
IN = "in"  # a row's environments, when not every object of the shape is in every one


@dataclass(frozen=True, kw_only=True)
class Member:
    """One object's template: its first environment's version, slots and environments."""

    key: Key
    base: Obj
    slots: tuple[Slot, ...]
    present: tuple[str, ...]
    partial: bool


@dataclass(frozen=True, kw_only=True)
class Shape:
    """Objects sharing one template: the first's version, generic slots and one row each."""

    name: str
    base: Obj
    slots: tuple[Slot, ...]
    rows: tuple[Obj, ...]
    guarded: bool


@dataclass(frozen=True)
class _Mark:
    """A slot's place in an object's skeleton."""

    index: int


def group(members: Sequence[Member]) -> tuple[list[Member], list[Shape]]:
    """The objects that stay one template each, and the shapes of two or more objects."""
    by_signature: dict[tuple[Any, ...], list[Member]] = {}
    for member in members:
        by_signature.setdefault(_signature(member), []).append(member)
    singles: list[Member] = []
    shapes: list[Shape] = []
    counts: dict[str, int] = {}
    for same_shape in by_signature.values():
        if len(same_shape) == 1:
            singles.extend(same_shape)
            continue
        kind = same_shape[0].key[0].lower()
        counts[kind] = counts.get(kind, 0) + 1
        shapes.append(_shape(f"{kind}-{counts[kind]}", members=same_shape))
    return singles, shapes


def _skeleton(member: Member) -> Any:
    """``member.base`` with a mark at each slot (containers on the way are copies)."""
    root: Any = dict(member.base)
    fresh = {id(root)}
    for index, slot in enumerate(member.slots):
        node = root
        for part in slot.path[:-1]:
            child = node[part]
            if id(child) not in fresh:
                child = child.copy()
                fresh.add(id(child))
                node[part] = child
            node = child
        node[slot.path[-1]] = _Mark(index)
    return root


def _leaves(value: Any, path: Path = ()) -> list[tuple[Path, Any]]:
    """Every scalar, empty container and mark of a skeleton, with its path."""
    if isinstance(value, dict) and value:
        return [leaf for k in sorted(value) for leaf in _leaves(value[k], (*path, k))]
    if isinstance(value, list) and value:
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, (*path, i))]
    return [(path, value)]


def _key_shape(key: ValueKey) -> tuple[str | None, ...]:
    """A value key with the parts that may differ between objects as None."""
    return tuple(
        part if part.startswith("$") or (i > 0 and key[i - 1] == WRAP) else None
        for i, part in enumerate(key)
    )


def _signature(member: Member) -> tuple[Any, ...]:
    entries: list[Any] = [member.key[0]]
    for path, leaf in _leaves(_skeleton(member)):
        if isinstance(leaf, _Mark):
            slot = member.slots[leaf.index]
            entries.append((path, "slot", _key_shape(slot.key), slot.optional))
        elif isinstance(leaf, dict | list):
            entries.append((path, type(leaf).__name__))
        else:
            entries.append((path, "value"))
    return tuple(entries)


@dataclass(frozen=True)
class _Column:
    """One place the objects of a shape may differ: a leaf, or a part of a slot's key."""

    path: Path
    part: int | None  # None: the leaf itself; else the index of the part in the slot's key
    name_hint: str


def _columns(member: Member) -> list[_Column]:
    out = []
    for path, leaf in _leaves(_skeleton(member)):
        if isinstance(leaf, _Mark):
            key = member.slots[leaf.index].key
            for i, wanted in enumerate(_key_shape(key)):
                if wanted is None:
                    hint = key[i - 1].lstrip("$") if i else "key"
                    out.append(_Column(path=path, part=i, name_hint=hint))
        elif not isinstance(leaf, dict | list):
            out.append(_Column(path=path, part=None, name_hint=str(path[-1]) if path else "v"))
    return out


def _read(member: Member, column: _Column, *, skeletons: Mapping[Key, Any]) -> Any:
    node = skeletons[member.key]
    for part in column.path:
        node = node[part]
    if column.part is None:
        return node
    return member.slots[node.index].key[column.part]


def _shape(name: str, *, members: Sequence[Member]) -> Shape:
    skeletons = {m.key: _skeleton(m) for m in members}
    first = members[0]
    vectors: dict[tuple[Any, ...], str] = {}  # a column's values in every object -> field
    chosen: dict[_Column, str] = {}
    taken = {IN}
    for column in _columns(first):
        values = tuple(_read(m, column, skeletons=skeletons) for m in members)
        if all(v == values[0] and type(v) is type(values[0]) for v in values[1:]):
            continue
        marked = tuple((type(v).__name__, v) for v in values)
        if marked not in vectors:
            vectors[marked] = _fresh(column.name_hint, taken=taken)
        chosen[column] = vectors[marked]
    parts = _derived({field: tuple(v for _, v in marked) for marked, field in vectors.items()})
    guarded = any(m.partial for m in members)
    real = {field for field, part in parts.items() if not (part.prefix or part.suffix)}
    kept = {column: field for column, field in chosen.items() if field in real}
    rows = tuple(_row(m, kept, skeletons=skeletons, guarded=guarded) for m in members)
    refs = {column: parts[field] for column, field in chosen.items()}
    return Shape(
        name=name,
        base=first.base,
        slots=_generic_slots(first, refs, skeletons=skeletons),
        rows=rows,
        guarded=guarded,
    )


def _derived(vectors: Mapping[str, tuple[Any, ...]]) -> dict[str, RowPart]:
    """How each field is read: itself, or another field between a constant prefix and
    suffix (a Job's name around its node's), which then stays out of the rows."""
    out: dict[str, RowPart] = {}
    kept: list[str] = []
    texts = {f: v for f, v in vectors.items() if all(isinstance(x, str) for x in v)}
    for field in sorted(vectors, key=lambda f: (sum(len(str(x)) for x in vectors[f]), f)):
        if field in texts:
            for basis in sorted(kept, key=lambda b: -len(texts[b][0])):
                part = _affix(texts[field], basis=texts[basis])
                if part is not None:
                    out[field] = RowPart(basis, *part)
                    break
        if field not in out:
            out[field] = RowPart(field)
            if field in texts and texts[field][0]:
                kept.append(field)
    return out


def _affix(values: Sequence[str], *, basis: Sequence[str]) -> tuple[str, str] | None:
    """The prefix and suffix that make every value from the basis's value, if any."""
    at = values[0].find(basis[0])
    if at < 0:
        return None
    prefix, suffix = values[0][:at], values[0][at + len(basis[0]) :]
    if not (prefix or suffix):
        return None
    if all(v == f"{prefix}{b}{suffix}" for v, b in zip(values, basis, strict=True)):
        return prefix, suffix
    return None


def _fresh(hint: str, *, taken: set[str]) -> str:
    name, n = hint, 1
    while name in taken:
        n += 1
        name = f"{hint}-{n}"
    taken.add(name)
    return name


def _row(
    member: Member, chosen: Mapping[_Column, str], *, skeletons: Mapping[Key, Any], guarded: bool
) -> Obj:
    row: Obj = {}
    for column, field in chosen.items():
        row[field] = _read(member, column, skeletons=skeletons)
    if guarded:
        row[IN] = list(member.present)
    return dict(sorted(row.items()))


def _generic_slots(
    first: Member, refs: Mapping[_Column, RowPart], *, skeletons: Mapping[Key, Any]
) -> tuple[Slot, ...]:
    """The first object's slots with row parts in their keys, plus a slot per row leaf."""
    keys = [list(slot.key) for slot in first.slots]
    out: list[Slot] = []
    for column, ref in refs.items():
        if column.part is None:
            values = dict.fromkeys(first.present, "")
            out.append(Slot(path=column.path, values=values, key=(ROW, ref)))
            continue
        keys[_read_mark(skeletons[first.key], column.path)][column.part] = ref
    slots = [
        Slot(path=slot.path, values=slot.values, key=tuple(keys[i]))
        for i, slot in enumerate(first.slots)
    ]
    return (*slots, *out)


def _read_mark(skeleton: Any, path: Path) -> int:
    for part in path:
        skeleton = skeleton[part]
    assert isinstance(skeleton, _Mark)
    return skeleton.index


def presence(envs: Sequence[str]) -> str:
    """The template condition of an object only the environments ``envs`` have."""
    return "has $.Values.environment (list " + " ".join(go_string(e) for e in envs) + ")"


def shape_template(shape: Shape) -> str:
    """The template of a shape: one document per row (per environment it is in)."""
    body = object_template(shape.base, slots=shape.slots, guard=None)
    rows = values_expr(("rows", shape.name))
    head = "{{- range $r := " + rows + " }}\n"
    if not shape.guarded:
        return head + "---\n" + body + "{{- end }}\n"
    inside = "{{- if has $.Values.environment (index $r " + go_string(IN) + ") }}\n"
    return head + inside + "---\n" + body + "{{- end }}\n{{- end }}\n"
