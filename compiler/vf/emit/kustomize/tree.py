"""Emit the Kustomize tree: ``overlays/<env>/`` per environment, ``components/`` shared.

Each overlay holds its environment's objects (``resources/``), with one environment as
with several, and ``base/`` lists none: a change to one environment touches only its
overlay and its plan, and a build reads the objects at one level (ADR 185). What the
environments share by construction are the shipped components (named for the flow), plain
kustomizations each overlay lists among its resources and patches (ADR 186). Building an
overlay therefore gives exactly the objects of that environment's plan.

Every object carries its namespace itself, and the shipped components get theirs from the
overlay's patches: an overlay has no ``namespace:`` field, because kustomize's namespace
transformer checks every object's new identity against every other object's, a cost that
grows with the square of the objects (ADR 180).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vf.emit.ordering import with_sync_waves
from vf.textio import yamlout
from vf.textio.objects import Obj

Tree = dict[str, str]
KUSTOMIZE_API = "kustomize.config.k8s.io/v1beta1"


def object_file(obj: Mapping[str, Any]) -> str:
    """``<kind>-<name>.yaml``: unique within one environment."""
    return f"{str(obj['kind']).lower()}-{obj['metadata']['name']}.yaml"


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    return (str(obj["kind"]), str(obj["metadata"]["name"]))


def _without_namespace(obj: Obj) -> Obj:
    out = copy.copy(obj)
    meta = dict(obj["metadata"])
    meta.pop("namespace", None)
    out["metadata"] = meta
    return out


@dataclass(frozen=True, kw_only=True)
class EnvObjects:
    """One environment's objects: the namespace, the flow's own and each component's."""

    namespace: str
    objects: Sequence[Obj]
    components: Mapping[str, Sequence[Obj]]
    generated: Mapping[str, Sequence[Obj]] = field(default_factory=dict)
    # each shipped component as the flow names it: what ``components/<name>/`` holds
    shapes: Mapping[str, Sequence[Obj]] = field(default_factory=dict)


def _with_sync_waves(env: EnvObjects) -> EnvObjects:
    """Argo CD sync waves belong to this tree only (the chart uses Helm hooks instead)."""
    return EnvObjects(
        namespace=env.namespace,
        objects=[with_sync_waves(o) for o in env.objects],
        components={c: [with_sync_waves(o) for o in objs] for c, objs in env.components.items()},
        generated={c: [with_sync_waves(o) for o in objs] for c, objs in env.generated.items()},
        shapes=env.shapes,
    )


def kustomize_files(envs: Mapping[str, EnvObjects]) -> Iterator[tuple[str, str]]:
    """The ``base/``, ``components/`` and ``overlays/`` files with their relative paths, one
    at a time, so none needs to stay in memory."""
    envs = {env: _with_sync_waves(objects) for env, objects in envs.items()}
    names = sorted(envs)
    owned = {
        env: {
            _key(o)
            for group in (envs[env].components, envs[env].generated)
            for objs in group.values()
            for o in objs
        }
        for env in names
    }
    indexed = {
        env: {_key(o): o for o in envs[env].objects if _key(o) not in owned[env]} for env in names
    }
    # Every object lives in its environment's overlay, with one environment as with several:
    # an object shared through base/ would move out of it as soon as one environment changed
    # it (ADR 85), and a build that reads base/ hands its objects up a level (ADR 185).
    yield (
        "base/kustomization.yaml",
        yamlout.dump({"apiVersion": KUSTOMIZE_API, "kind": "Kustomization", "resources": []}),
    )
    shapes = {c: objs for env in reversed(names) for c, objs in envs[env].shapes.items()}
    for component in sorted({c for env in names for c in envs[env].components}):
        shipped = [_without_namespace(o) for o in shapes[component]]
        yield from _component_files(component, shipped).items()
    for env in names:
        for component, objects in sorted(envs[env].generated.items()):
            yield from _component_files(component, objects).items()
    for env in names:
        overlay = _Overlay(root=f"overlays/{env}")
        yield from overlay.resource_files(indexed[env])
        for component, objects in sorted(envs[env].components.items()):
            overlay.add_component(component, objects, shapes=shapes[component])
        for component in sorted(envs[env].generated):
            overlay.components.append(f"../../components/{component}")
        yield from overlay.files().items()


def _component_files(component: str, objects: Sequence[Obj]) -> Tree:
    """A component's folder: a shipped one named for the flow (``infra.flow_component``),
    or one vf writes itself (its objects are exactly one environment's).

    It is a plain kustomization the overlays list among their resources, not a kustomize
    ``Component``: a component is applied by adding every object built so far to a new
    map, one identity check against all the others each, and these folders only hold
    objects, which a resource adds the same way for a few checks each (ADR 186)."""
    root = f"components/{component}"
    tree: Tree = {}
    for obj in objects:
        tree[f"{root}/{object_file(obj)}"] = yamlout.dump(obj)
    tree[f"{root}/kustomization.yaml"] = yamlout.dump(
        {
            "apiVersion": KUSTOMIZE_API,
            "kind": "Kustomization",
            "resources": sorted(object_file(o) for o in objects),
        }
    )
    return tree


@dataclass
class _Overlay:
    root: str
    tree: Tree = field(default_factory=dict)
    resources: list[str] = field(default_factory=list)
    components: list[str] = field(default_factory=list)
    patches: list[Obj] = field(default_factory=list)

    def resource_files(self, objects: Mapping[tuple[str, str], Obj]) -> Iterator[tuple[str, str]]:
        """Each object's file, made as it is handed on: a large overlay's text is never all
        in memory at once."""
        for obj in objects.values():
            name = object_file(obj)
            self.resources.append(f"resources/{name}")
            yield f"{self.root}/resources/{name}", yamlout.dump(obj)

    def add_patch(self, key: tuple[str, str], old: Obj, new: Obj) -> None:
        ops = json_patch(old, new)
        if ops:
            name = object_file(new)
            self.tree[f"{self.root}/patches/{name}"] = yamlout.dump_sequence(ops)
            self.patches.append(
                {"path": f"patches/{name}", "target": {"kind": key[0], "name": key[1]}}
            )

    def add_component(
        self, component: str, objects: Sequence[Obj], *, shapes: Sequence[Obj]
    ) -> None:
        self.components.append(f"../../components/{component}")
        shipped = {_key(o): _without_namespace(o) for o in shapes}
        for obj in objects:
            self.add_patch(_key(obj), shipped[_key(obj)], obj)

    def files(self) -> Tree:
        kustomization: Obj = {
            "apiVersion": KUSTOMIZE_API,
            "kind": "Kustomization",
            "resources": ["../../base", *self.components, *sorted(self.resources)],
        }
        if self.patches:
            kustomization["patches"] = sorted(self.patches, key=lambda p: str(p["path"]))
        self.tree[f"{self.root}/kustomization.yaml"] = yamlout.dump(kustomization)
        return self.tree


def _pointer(parts: Sequence[str | int]) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def json_patch(old: Any, new: Any, path: tuple[str | int, ...] = ()) -> list[Obj]:
    """RFC 6902 operations turning ``old`` into ``new``; lists of unequal length are replaced."""
    if old is new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[Obj] = []
        for key in sorted(set(old) | set(new)):
            if key not in new:
                ops.append({"op": "remove", "path": _pointer((*path, key))})
            elif key not in old:
                ops.append({"op": "add", "path": _pointer((*path, key)), "value": new[key]})
            else:
                ops.extend(json_patch(old[key], new[key], (*path, key)))
        return ops
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        ops = []
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            ops.extend(json_patch(a, b, (*path, index)))
        return ops
    if old == new and type(old) is type(new):
        return []
    return [{"op": "replace", "path": _pointer(path), "value": new}]
