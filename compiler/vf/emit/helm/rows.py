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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vf.emit.helm.slots import Slot, ValueKey, blank
from vf.emit.helm.text import (
    GEN_NAME,
    LITERAL,
    NB_TASKS_KEY,
    POD,
    ROW,
    WRAP,
    RowPart,
    go_string,
    object_template,
    values_expr,
)
from vf.memo import current, kept
from vf.textio.objects import Obj
from vf_runtime.labels import is_optional

Path = tuple[str | int, ...]
Key = tuple[str, str]
IN = "in"  # a row's environments, when not every object of the shape is in every one


@dataclass(frozen=True, kw_only=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class _Mark:
    """A slot's place in an object's skeleton, and what it adds to the object's signature."""

    index: int
    token: tuple[Any, ...]


def group(members: Sequence[Member]) -> tuple[list[Member], list[Shape]]:
    """The objects that stay one template each, and the shapes of two or more objects."""
    by_signature: dict[tuple[Any, ...], list[tuple[Member, list[Any]]]] = {}
    for member in members:
        # the variables' names too: a column per variable name is no row a person reads
        signature: list[Any] = [member.key[0], _env_names(member)]
        leaves: list[Any] = []
        _flatten(_skeleton(member), signature.append, leaves.append)
        by_signature.setdefault(tuple(signature), []).append((member, leaves))
    singles: list[Member] = []
    shapes: list[Shape] = []
    counts: dict[str, int] = {}
    for same_shape in by_signature.values():
        if len(same_shape) == 1:
            singles.append(same_shape[0][0])
            continue
        kind = same_shape[0][0].key[0].lower()
        counts[kind] = counts.get(kind, 0) + 1
        shapes.append(_shape(f"{kind}-{counts[kind]}", members=same_shape))
    return singles, shapes


def _env_names(member: Member) -> tuple[Any, ...]:
    """The names of every container's variables; a variable that is a slot of its own (an
    optional or derived one) counts as its slot, whatever its name in this version."""
    spec = ((member.base.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list):
        return ()
    slotted = {s.path for s in member.slots if len(s.path) == 7 and s.path[5] == "env"}
    return tuple(
        tuple(
            None
            if (*_CONTAINERS, i, "env", j) in slotted or not isinstance(e, dict)
            else e.get("name")
            for j, e in enumerate(c.get("env") or ())
        )
        for i, c in enumerate(containers)
        if isinstance(c, dict)
    )


_CONTAINERS = ("spec", "template", "spec", "containers")


def _skeleton(member: Member) -> Any:
    """``member.base`` with a mark at each slot (containers on the way are copies)."""
    root: Any = dict(member.base)
    fresh = {id(root)}
    above: Path = ()  # the last slot's parent path and container: the next often shares it
    node, marks = root, current().chart_marks
    for index, slot in enumerate(member.slots):
        path = slot.path
        if path[:-1] != above:
            above, node = path[:-1], root
            for part in above:
                child = node[part]
                if id(child) not in fresh:
                    child = child.copy()
                    fresh.add(id(child))
                    node[part] = child
                node = child
        node[path[-1]] = _mark(index, ("slot", _key_shape(slot.key), slot.optional), marks)
    return root


def _mark(index: int, token: tuple[Any, ...], marks: dict[Any, _Mark]) -> _Mark:
    """One mark for each index and token: thousands of objects' leaves hold the same few
    (``marks``: the compile's table of them)."""
    found = marks.get((index, token))
    return found if found is not None else kept(marks, (index, token), lambda: _Mark(index, token))


def _flatten(value: Any, signature: Callable[[Any], None], leaves: Callable[[Any], None]) -> None:
    """A skeleton walked with its keys in sorted order: the structure goes to ``signature``,
    every scalar, empty container and mark to ``leaves``. Skeletons with equal signatures
    have their leaves in the same places, in the order ``_leaf_paths`` gives them."""
    kind = type(value)
    if kind in _SCALARS:
        signature("value")
        leaves(value)
    elif kind is _Mark:
        signature(value.token)
        leaves(value)
    elif isinstance(value, dict) and value:
        keys = sorted(value)
        signature(("{", *keys))
        for key in keys:
            item = value[key]
            kind = type(item)
            if kind in _SCALARS:  # the commonest leaves, without a call
                signature("value")
                leaves(item)
            elif kind is _Mark:
                signature(item.token)
                leaves(item)
            else:
                _flatten(item, signature, leaves)
    elif isinstance(value, list) and value:
        signature(("[", len(value)))
        for item in value:
            if type(item) in _SCALARS:
                signature("value")
                leaves(item)
            else:
                _flatten(item, signature, leaves)
    else:
        signature(_leaf_tag(value))
        leaves(value)


_SCALARS = frozenset({str, int, float, bool, type(None)})  # leaves tagged "value"


def _leaf_paths(value: Any, path: Path = ()) -> list[Path]:
    """The path of each leaf ``_flatten`` finds, in its order."""
    if isinstance(value, dict) and value:
        return [leaf for k in sorted(value) for leaf in _leaf_paths(value[k], (*path, k))]
    if isinstance(value, list) and value:
        return [leaf for i, v in enumerate(value) for leaf in _leaf_paths(v, (*path, i))]
    return [path]


def _leaf_tag(value: Any) -> str:
    return type(value).__name__ if isinstance(value, dict | list) else "value"


def _key_shape(key: ValueKey) -> tuple[str | None, ...]:
    """A value key with the parts that may differ between objects as None."""
    if "$" not in "".join(key):  # the common key: nothing Helm or a helper supplies
        return (None,) * len(key)
    before = ("", *key[:-1])  # each part's predecessor
    return tuple(
        [
            part if part[:1] == "$" or previous == WRAP else None
            for part, previous in zip(key, before, strict=True)
        ]
    )


@dataclass(frozen=True)
class _Column:
    """One place the objects of a shape may differ: a leaf, or a part of a slot's key."""

    path: Path
    leaf: int  # the leaf's index in the walk
    part: int | None  # None: the leaf itself; else the index of the part in the slot's key
    name_hint: str


def _columns(member: Member, leaves: Sequence[Any]) -> list[_Column]:
    """Where the objects of ``member``'s shape may differ; ``leaves`` are its own."""
    paths = _leaf_paths(_skeleton(member))
    out = []
    for leaf_index, (path, leaf) in enumerate(zip(paths, leaves, strict=True)):
        if isinstance(leaf, _Mark):
            key = member.slots[leaf.index].key
            for i, wanted in enumerate(_key_shape(key)):
                if wanted is None:
                    hint = _part_hint(key, i, path=path)
                    out.append(_Column(path=path, leaf=leaf_index, part=i, name_hint=hint))
        elif not isinstance(leaf, dict | list):
            hint = _leaf_hint(member.base, path)
            out.append(_Column(path=path, leaf=leaf_index, part=None, name_hint=hint))
    return out


# what the parts of a derived value's key are, for its column's name
_PART_NAMES: dict[str, tuple[str, ...]] = {
    NB_TASKS_KEY: ("", "node"),
    POD: ("", "override", "how", "node", "own-keys"),
    GEN_NAME: ("", "name"),
}
_SECTION_PARTS = {"nodes": "node", "generated": "object", "rows": "shape"}


def _part_hint(key: ValueKey, i: int, *, path: Path) -> str:
    """A readable name for the column a key's part ``i`` becomes: what the part is (a node,
    its parents), or the field it stands for, never another row's value."""
    if not i:
        return "key"
    names = _PART_NAMES.get(key[0], ())
    if i < len(names) and names[i]:
        return names[i]
    previous = key[i - 1]
    if previous == LITERAL:  # a text of vf's own: named after the field it fills
        return str(path[-1]) if path else "text"
    if previous in _SECTION_PARTS:
        return _SECTION_PARTS[previous]
    return previous.lstrip("$") if previous.startswith("$") else "part"


def _leaf_hint(base: Obj, path: Path) -> str:
    """A leaf's column name: its field, or a variable's name for the variable's value."""
    if len(path) >= 3 and path[-3] == "env" and path[-1] == "value":
        item: Any = base
        for part in path[:-1]:
            try:
                item = item[part]
            except (KeyError, IndexError, TypeError):
                item = None
                break
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            return str(item["name"])
    return str(path[-1]) if path else "v"


def _shape(name: str, *, members: Sequence[tuple[Member, list[Any]]]) -> Shape:
    first, first_leaves = members[0]
    # Each leaf in every object (a shape's objects have equally many leaves).
    table = list(zip(*(leaves for _, leaves in members), strict=True))
    fields: dict[tuple[Any, ...], str] = {}  # a column's values and their types -> field
    vectors: dict[str, tuple[Any, ...]] = {}  # field -> its value in every object
    chosen: dict[_Column, str] = {}
    taken = {IN}
    for column in _columns(first, first_leaves):
        values = _column_values(members, table[column.leaf], part=column.part)
        if values.count(values[0]) == len(values) and len(set(map(type, values))) == 1:
            continue  # the same in every object (count compares in C)
        marked = (tuple(map(type, values)), values)
        if marked not in fields:
            fields[marked] = _fresh(column.name_hint, taken=taken)
            vectors[fields[marked]] = values
        chosen[column] = fields[marked]
    del table
    parts = _derived(vectors)
    guarded = any(m.partial for m, _ in members)
    real = {field for field, part in parts.items() if not (part.prefix or part.suffix)}
    names = sorted({*(f for f in chosen.values() if f in real), *([IN] if guarded else [])})
    rows = tuple(
        {f: list(m.present) if f == IN else vectors[f][i] for f in names}
        for i, (m, _) in enumerate(members)
    )
    refs = {column: parts[field] for column, field in chosen.items()}
    return Shape(
        name=name,
        base=first.base,
        slots=_generic_slots(first, first_leaves, refs),
        rows=rows,
        guarded=guarded,
    )


def _column_values(
    members: Sequence[tuple[Member, list[Any]]], leaves: tuple[Any, ...], *, part: int | None
) -> tuple[Any, ...]:
    """A column's value in every object: its leaf, or a part of its slot's key."""
    if part is None:
        return leaves
    return tuple(
        [m.slots[mark.index].key[part] for (m, _), mark in zip(members, leaves, strict=True)]
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


def _generic_slots(
    first: Member, leaves: Sequence[Any], refs: Mapping[_Column, RowPart]
) -> tuple[Slot, ...]:
    """The first object's slots with row parts in their keys, plus a slot per row leaf."""
    keys = [list(slot.key) for slot in first.slots]
    out: list[Slot] = []
    for column, ref in refs.items():
        if column.part is None:
            values = blank(first.present)
            out.append(Slot(path=column.path, values=values, key=(ROW, ref)))
            continue
        keys[leaves[column.leaf].index][column.part] = ref
    slots = [
        Slot(path=slot.path, values=slot.values, key=tuple(keys[i]))
        for i, slot in enumerate(first.slots)
    ]
    return (*slots, *out)


def presence(envs: Sequence[str]) -> str:
    """The template condition of an object only the environments ``envs`` have."""
    return "has $.Values.environment (list " + " ".join(go_string(e) for e in envs) + ")"


def _all(conditions: Sequence[str]) -> str | None:
    if len(conditions) < 2:
        return conditions[0] if conditions else None
    return "and " + " ".join(f"({c})" for c in conditions)  # and stops at the first false


def served(obj: Obj) -> list[str]:
    """An object the flow runs without (``vf.dev/optional``) renders only where the cluster
    serves its kind, as Helm's discovery reads it (ADR 0202): ``helm install`` builds every
    object before it applies any, and one unknown kind fails the release."""
    if not is_optional(obj):
        return []
    api = f"{obj['apiVersion']}/{obj['kind']}"
    return [f"$.Capabilities.APIVersions.Has {go_string(api)}"]


def member_guard(member: Member) -> str | None:
    """The template condition of one object: its environments, its API."""
    conditions = [presence(member.present)] if member.partial else []
    return _all([*conditions, *served(member.base)])


def shape_template(shape: Shape) -> str:
    """The template of a shape: one document per row (per environment it is in)."""
    body = object_template(shape.base, slots=shape.slots, guard=None)
    rows = values_expr(("rows", shape.name))
    head = "{{- range $r := " + rows + " }}\n"
    conditions = ["has $.Values.environment (index $r " + go_string(IN) + ")"] * shape.guarded
    guard = _all([*conditions, *served(shape.base)])
    if guard is None:
        return head + "---\n" + body + "{{- end }}\n"
    inside = "{{- if " + guard + " }}\n"
    return head + inside + "---\n" + body + "{{- end }}\n{{- end }}\n"
