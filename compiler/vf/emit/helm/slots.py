"""Where a chart template takes a value: the fields of one object that vary.

An object is compared across the environments that have it. Every field equal in all of
them stays verbatim; every field that differs (or may be missing) becomes a *slot*, read
from ``.Values`` at a key. Fields an operator legitimately sets per environment (images,
pull policy, resources, priority class, GPU runtime class, broker URLs, Secret references)
are slots even when equal, under readable keys; any other difference gets a key under
``generated``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from vf.memo import current, kept
from vf.textio.objects import Obj
from vf_runtime.labels import (
    GENERATION_KEY,
    NODE_LABEL,
    is_provision_job,
)

Path = tuple[str | int, ...]
ValueKey = tuple[str, ...]
ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "ABSENT"})()
POD_SPEC: Path = ("spec", "template", "spec")
TOPOLOGY = "$topology"  # ("$topology", text, node, text, …): a shard from the counts
_WORKLOADS = frozenset({"Deployment", "StatefulSet", "Job", "DaemonSet"})
_CONTAINER_KNOBS = frozenset({"image", "resources", "imagePullPolicy", "env"})
_SECRET_REF = ("valueFrom", "secretKeyRef")


@dataclass(frozen=True, kw_only=True, slots=True)
class Slot:
    """One varying field: its path in the object and its value (or ABSENT) per environment."""

    path: Path
    values: Mapping[str, Any]
    key: ValueKey

    @property
    def optional(self) -> bool:
        """Whether the field may be missing in some environment (or with some values)."""
        return ABSENT in self.values.values()  # compared by identity: nothing equals it


def blank(envs: Iterable[str]) -> Mapping[str, Any]:
    """``dict.fromkeys(envs, "")``, the values of a slot whose text the template makes, one
    mapping shared by every such slot of the same environments."""
    names = tuple(envs)
    return kept(current().chart_blanks, names, lambda: dict.fromkeys(names, ""))


_SCALARS = frozenset({str, int, bool, type(None), type(ABSENT)})


def supplied(path: Path, *, envs: Iterable[str], key: ValueKey) -> Slot:
    """A slot whose text Helm or the template supplies (its values are ``blank``): one
    slot shared by every object with it at the same path in the same environments."""
    names, table = tuple(envs), current().chart_supplied
    found: Slot = kept(
        table, (path, names, key), lambda: Slot(path=path, values=blank(names), key=key)
    )
    return found


def _one(path: Path) -> Path:
    """``path``, or an equal path a slot already holds (objects of a kind share theirs)."""
    return kept(current().chart_paths, path, lambda: path)


def shared(values: Mapping[str, Any]) -> Mapping[str, Any]:
    """``values``, or an equal mapping another slot already holds when every value is a
    scalar: thousands of slots hold ``{"dev": 1}`` or ``{"dev": ABSENT}``. Equal means of
    the same type too, as ``same`` compares them."""
    table = current().chart_values
    if len(values) == 1:  # one environment: no generator to run
        ((env, value),) = values.items()
        kind = type(value)
        if kind not in _SCALARS:
            return values
        found = table.get((env, kind, value))
        return found if found is not None else kept(table, (env, kind, value), lambda: values)
    if any(type(v) not in _SCALARS for v in values.values()):
        return values
    return kept(table, tuple((env, type(v), v) for env, v in values.items()), lambda: values)


def same(a: Any, *, other: Any) -> bool:
    """Equal as JSON values (so ``True``, ``1`` and ``1.0`` differ)."""
    if a is ABSENT or other is ABSENT:
        return a is other
    if a is other:
        return True
    if isinstance(a, list | tuple) and isinstance(other, list | tuple):
        return len(a) == len(other) and all(same(x, other=y) for x, y in zip(a, other, strict=True))
    if type(a) is not type(other):
        return False
    if isinstance(a, dict):
        return a.keys() == other.keys() and all(same(a[k], other=other[k]) for k in a)
    return bool(a == other)


def owner(obj: Mapping[str, Any]) -> ValueKey | None:
    """The values section an object's knobs live under: a node or the provision Job (the
    broker's and the store's are role templates' values, ``vf.emit.helm.infra_roles``)."""
    labels = obj.get("metadata", {}).get("labels") or {}
    if is_provision_job(obj):
        return ("provision",)
    if NODE_LABEL in labels:
        return ("nodes", str(labels[NODE_LABEL]))
    return None


def lookup(obj: Any, path: Path) -> Any:
    """The value at ``path`` in nested mappings and lists, or None where it leads nowhere."""
    try:
        for part in path:
            obj = obj[part]
    except (KeyError, IndexError, TypeError):
        return None
    return obj


def string_leaves(obj: Any, path: Path = ()) -> Iterator[tuple[Path, str]]:
    """Every string below ``obj``, with its path, in document order."""
    if isinstance(obj, str):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from string_leaves(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from string_leaves(v, (*path, i))


def strings_holding(obj: Any, marker: str, path: Path = ()) -> Iterator[tuple[Path, str]]:
    """Every string below ``obj`` that holds ``marker``, with its path, in document order."""
    items = (
        obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    )
    for key, value in items:
        if isinstance(value, str):
            if marker in value:
                yield (*path, key), value
        elif isinstance(value, dict | list):
            yield from strings_holding(value, marker, (*path, key))


def _at(obj: Any, *, path: Path) -> Any:
    for part in path:
        obj = obj[part]
    return obj


def knob_key(obj: Obj, *, path: Path) -> ValueKey | None:
    """The operator-facing key of a field that is always a value, else None."""
    return _knob_key(obj, path=path, base=owner(obj))


def _knob_key(obj: Obj, *, path: Path, base: ValueKey | None) -> ValueKey | None:
    kind = obj.get("kind")
    if len(path) < 4 or base is None or path[:3] != POD_SPEC or kind not in _WORKLOADS:
        return None
    if len(path) == 4:
        return ("priorityClassName",) if path[3] == "priorityClassName" else None
    if len(path) < 6 or path[3] != "containers" or not isinstance(path[4], int):
        return None
    return _container_knob(obj, path=path, base=base)


def _container_knob(obj: Obj, *, path: Path, base: ValueKey) -> ValueKey | None:
    containers = _at(obj, path=(*POD_SPEC, "containers"))
    index = int(path[4])
    mine = base if len(containers) == 1 else (*base, "containers", str(containers[index]["name"]))
    field = path[5:]
    if field in (("image",), ("resources",)):
        return (*mine, str(field[0]))
    if field == ("imagePullPolicy",):
        return ("imagePullPolicy",)
    if len(field) == 5 and field[0] == "env" and field[2:4] == _SECRET_REF:
        var = _at(obj, path=(*path[:-3], "name"))
        return ("secretRefs", str(var), str(field[4]))
    return None


def may_hold_knob(obj: Obj, *, path: Path) -> bool:
    """Whether ``knob_key`` can name a field at or below ``path`` of ``obj``."""
    return _knob_scope(obj)(path)


def _knob_scope(obj: Obj) -> Callable[[Path], bool]:
    """``may_hold_knob`` for one object, with what it needs of the object read once.

    It mirrors ``knob_key``: a knob only sits under a vf workload's pod spec, at the pod
    fields and container fields ``knob_key`` names.
    """
    kind = obj.get("kind")
    if kind not in _WORKLOADS or owner(obj) is None:
        return _nowhere
    return _under_pod_spec


def below(path: Path, parents: Iterable[Path]) -> bool:
    """Whether ``path`` lies strictly below one of ``parents``."""
    depth = len(path)
    for parent in parents:  # noqa: SIM110 - a loop: no generator made on every call
        if len(parent) < depth and path[: len(parent)] == parent:
            return True
    return False


def _nowhere(path: Path) -> bool:
    return False


def _under_pod_spec(path: Path) -> bool:
    depth = len(POD_SPEC)
    if len(path) <= depth:
        return path == POD_SPEC[: len(path)]
    if path[:depth] != POD_SPEC:
        return False
    rest = path[depth:]
    if rest[0] == "priorityClassName":
        return len(rest) == 1
    return rest[0] == "containers" and _in_container_knob(rest[2:])


def _in_container_knob(field: Path) -> bool:
    """Whether a container's ``field`` (a path below one container) is or holds a knob."""
    if len(field) <= 1:
        return not field or field[0] in _CONTAINER_KNOBS
    if field[0] != "env":
        return False
    below_item = len(field) - 2  # an entry's own fields: only a Secret reference is a knob
    return below_item <= 0 or (below_item <= 3 and field[2:4] == _SECRET_REF[:below_item])


def _all_same(present: list[Any]) -> bool:
    return all(same(v, other=present[0]) for v in present[1:])


_GENERATION_PATHS: dict[str, tuple[Path, ...]] = {
    "Job": (("spec", "template", "metadata", "annotations", GENERATION_KEY),),
}


def derived_key(obj: Obj, *, path: Path) -> ValueKey:
    """The key of a differing field that is not a knob: readable where known, else generated."""
    if path in _GENERATION_PATHS.get(str(obj.get("kind")), ()):
        return ("generation",)  # one value: every Job shares it
    base = owner(obj)
    replicas = path in (("spec", "replicas"), ("spec", "parallelism"), ("spec", "completions"))
    if base is not None and obj.get("kind") in _WORKLOADS and replicas:
        return (*base, "replicas")
    return generated_key(obj, path=path)


def generated_key(obj: Mapping[str, Any], *, path: Path) -> ValueKey:
    pointer = "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)
    return ("generated", f"{obj['kind']}/{obj['metadata']['name']}", pointer)


def find_slots(versions: Mapping[str, Obj]) -> list[Slot]:
    """Every slot of one object, given its version in each environment that has it."""
    first = versions[sorted(versions)[0]]
    finder = _SlotFinder(first=first, scope=_knob_scope(first), base=owner(first))
    if len(versions) == 1:
        ((env, only),) = versions.items()
        finder.walk_one((), env=env, value=only)
    else:
        finder.walk((), values=dict(versions))
    return finder.out


def _settled(values: Mapping[str, Any]) -> bool:
    """Present and equal in every environment."""
    present = list(values.values())
    return all(v is not ABSENT for v in present) and _all_same(present)


@dataclass
class _SlotFinder:
    """One object's walk: ``first`` decides what is a knob, ``out`` collects the slots."""

    first: Obj
    scope: Callable[[Path], bool]
    base: ValueKey | None  # owner(first)
    out: list[Slot] = field(default_factory=list)

    def knob(self, path: Path) -> ValueKey | None:
        return self.knob_at(path) if path and self.scope(path) else None

    def knob_at(self, path: Path) -> ValueKey | None:
        return _knob_key(self.first, path=path, base=self.base)

    def descend(self, path: Path, *, values: dict[str, Any]) -> None:
        """``walk`` below ``path``, skipping at once what it would return from at once."""
        scoped = self.scope(path)
        if not scoped and _settled(values):
            return
        first, *others = values.values()
        if first is not ABSENT and all(v is first for v in others):
            # One object every environment holds: nothing below differs, so its slots
            # are the knobs below it, as the one-environment walk finds them.
            self._walk_one(path, envs=tuple(values), value=first, scoped=scoped)
            return
        self.walk(path, values=values)

    def walk_one(self, path: Path, *, env: str, value: Any) -> None:
        """``walk`` of an object one environment has: nothing differs, so its slots are
        the knobs (present or not) and any field that is missing."""
        if not path and self.scope is _under_pod_spec:
            # A workload's knobs all lie under its pod spec: straight there (where the
            # walk would go, skipping every other field on the way).
            for key in POD_SPEC:
                if not (isinstance(value, dict) and key in value):
                    return
                value = value[key]
            path = POD_SPEC
        self._walk_one(path, envs=(env,), value=value, scoped=self.scope(path))

    def _walk_one(self, path: Path, *, envs: tuple[str, ...], value: Any, scoped: bool) -> None:
        """``walk_one`` of the one ``value`` that ``envs`` all hold, with ``scoped``,
        whether ``path`` may hold a knob, known."""
        if value is ABSENT:
            forced = self.knob_at(path) if path and scoped else None
            key = forced if forced is not None else derived_key(self.first, path=path)
            values = shared(dict.fromkeys(envs, value))
            self.out.append(Slot(path=_one(path), values=values, key=key))
            return
        if not scoped:
            return  # nothing below is a knob
        forced = self.knob_at(path) if path else None
        scope = self.scope
        if forced is not None:
            values = shared(dict.fromkeys(envs, value))
            self.out.append(Slot(path=_one(path), values=values, key=forced))
        elif isinstance(value, dict) and value:
            keys = list(value)
            if (
                path == POD_SPEC
                and "priorityClassName" not in value
                and self.knob((*path, "priorityClassName")) is not None
            ):
                keys.append("priorityClassName")  # settable per environment even when unset
            for key in sorted(keys):
                child = (*path, key)
                item = value.get(key, ABSENT)
                inside = scope(child)
                if item is ABSENT or inside:
                    self._walk_one(child, envs=envs, value=item, scoped=inside)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                child = (*path, index)
                if scope(child):
                    self._walk_one(child, envs=envs, value=item, scoped=True)

    def walk(self, path: Path, *, values: dict[str, Any]) -> None:
        present = [v for v in values.values() if v is not ABSENT]
        whole = len(present) == len(values)
        if not self.scope(path):
            if whole and _all_same(present):
                return  # nothing below differs and nothing below is a knob: no slot here
        elif path:
            forced = self.knob_at(path)
            if forced is not None:
                self.out.append(Slot(path=path, values=values, key=forced))
                return
        if whole and all(isinstance(v, dict) for v in present):
            common = set.intersection(*(set(v) for v in present))
            if common:
                keys = set().union(*(set(v) for v in present))
                if path == POD_SPEC and self.knob((*path, "priorityClassName")) is not None:
                    keys.add("priorityClassName")  # settable per environment even when unset
                for key in sorted(keys):
                    self.descend(
                        (*path, key), values={e: v.get(key, ABSENT) for e, v in values.items()}
                    )
                return
        lengths = {len(v) for v in present if isinstance(v, list)}
        if (
            whole
            and all(isinstance(v, list) for v in present)
            and len(lengths) == 1
            and 0 not in lengths
        ):
            for index in range(lengths.pop()):
                self.descend((*path, index), values={e: v[index] for e, v in values.items()})
            return
        if whole and _all_same(present):
            return
        self.out.append(Slot(path=path, values=values, key=derived_key(self.first, path=path)))
