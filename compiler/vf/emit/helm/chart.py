"""Emit ``chart/``: a Helm chart that renders, with ``values-<env>.yaml``, the objects of
that environment's overlay.

Derived from the per-environment objects together, like the Kustomize tree: a field equal
everywhere is verbatim in ``templates/``; a field that differs is a value; an object that
only some environments have is guarded by the ``environment`` value. Objects of one shape
share a template that ranges over rows (``vf.emit.helm.rows``). The namespace is the release's.
The provision Job is a Helm hook here and only here.
"""

from __future__ import annotations

import copy
import hashlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from vf import __version__
from vf.emit.helm.envlist import aligned
from vf.emit.helm.flow_roles import role_generation
from vf.emit.helm.generations import (
    generations,
    keyed_by_generation,
    matched_objects,
    stable,
    with_generation_names,
)
from vf.emit.helm.image_tag import IMAGE_TAG_VALUES, retagged
from vf.emit.helm.job_tags import with_job_name
from vf.emit.helm.job_values import JOB_READS, JOB_VALUES, job_reads, job_values_digest
from vf.emit.helm.overrides import OVERRIDE_VALUES, with_overrides
from vf.emit.helm.planned import (
    PLANNED_REPLICAS,
    environment_guard,
    guarded,
    neutral_values,
    planned_replicas,
)
from vf.emit.helm.provision_roles import shared_topology
from vf.emit.helm.readable import readable_keys
from vf.emit.helm.replicas import with_replica_slots, worker_envs
from vf.emit.helm.roles import is_role_object, neutral_roles, role_kinds, role_templates
from vf.emit.helm.rows import Member, group, member_guard, shape_template
from vf.emit.helm.schema import values_schema
from vf.emit.helm.slots import (
    ABSENT,
    Slot,
    ValueKey,
    below,
    find_slots,
    generated_key,
    lookup,
    same,
    strings_holding,
    supplied,
)
from vf.emit.helm.text import (
    HELM_CHART_LABEL,
    IN_RELEASE_NAMESPACE,
    RELEASE_NAMESPACE,
    RELEASE_SERVICE,
    TEMPLATED,
    job_keyed,
    object_template,
    render_text,
    values_key,
)
from vf.emit.helm.topology import with_topology_slots
from vf.emit.helm.version import DIGEST_ANNOTATION, ChartRelease, chart_version
from vf.emit.helm.workers import shared_workers, worker_kinds
from vf.emit.kustomize.tree import object_file
from vf.emit.ordering import with_helm_hooks, without_tool_annotations
from vf.memo import current
from vf.textio import yamlout
from vf.textio.filetext import Chunks, FileText, whole
from vf.textio.jsontext import json_chunks
from vf.textio.objects import Obj
from vf_runtime.labels import MANAGED_BY

Tree = dict[str, str]
File = tuple[str, FileText]
Key = tuple[str, str]
ROOT = "chart"


@dataclass(frozen=True, kw_only=True)
class ChartInfo:
    """What the chart's metadata and notes say about the flow."""

    name: str
    flow_type: str
    kubernetes_versions: Mapping[str, str]
    namespaces: Mapping[str, str]
    nodes: tuple[str, ...]
    # nodes with partition_by: their count is part of the run id and the topology, so a
    # --set cannot follow it even where it is a Deployment's (one replica)
    partitioned: frozenset[str] = frozenset()
    previous: ChartRelease | None = None  # the chart the tree holds now (its version)
    # each environment's values of the role templates, from its plan (``vf.emit.helm.roles``)
    roles: Mapping[str, Obj] = field(default_factory=dict)


def _prepared(objects: Sequence[Obj], *, namespaced: set[Key]) -> dict[Key, Obj]:
    """Chart copies of one environment's objects: Helm hooks, no namespace (noted aside).

    The Namespace itself is left out: the release's namespace exists before any object of
    the release (``--create-namespace``), and Helm cannot adopt it.
    """
    out: dict[Key, Obj] = {}
    for obj in objects:
        if obj.get("kind") == "Namespace":
            continue
        clean = with_helm_hooks(without_tool_annotations(obj))
        key = (str(clean["kind"]), str(clean["metadata"]["name"]))
        if clean["metadata"].pop("namespace", None) is not None:
            namespaced.add(key)
        out[key] = clean
    return out


def emit_helm(per_env: Mapping[str, Sequence[Obj]], *, info: ChartInfo) -> Tree:
    """Every file of ``chart/`` keyed by its path in the output tree."""
    return dict(sorted((path, whole(text)) for path, text in chart_files(per_env, info=info)))


def _keyed(make: Callable[[], str]) -> str:
    return job_keyed(make())


def chart_files(per_env: Mapping[str, Sequence[Obj]], *, info: ChartInfo) -> Iterator[File]:
    """The files of ``emit_helm`` one at a time, in path order and ``Chart.yaml`` last (its
    version digests every file but the environments' values, ADR 188), so none needs to
    stay in memory."""
    envs = sorted(per_env)
    everything, workers = per_env, worker_envs(per_env)
    # what a role template renders is not the diff path's (ADR 229)
    per_env = {env: [o for o in per_env[env] if not is_role_object(o)] for env in envs}
    templates = _members(per_env, info=info, workers=workers)
    resolved = readable_keys(_resolve_keys(templates, envs=envs), flow=info.name)
    templates = [with_overrides(t) for t in resolved]
    del resolved
    singles, shapes = group(templates)  # its working set is the chart's peak: values after
    values = _all_values(templates, per_env=everything, info=info)
    makers: dict[str, Callable[[], FileText]] = {}
    for one in singles:
        guard = member_guard(one)
        makers[f"templates/{object_file(stable(one.key))}"] = partial(
            _keyed, partial(object_template, one.base, slots=one.slots, guard=guard)
        )
    for shape in shapes:
        makers[f"templates/rows/{shape.name}.yaml"] = partial(
            _keyed, partial(shape_template, shape)
        )
    rows = {shape.name: list(shape.rows) for shape in shapes}
    reads = job_reads(templates, shapes)
    for env in envs:  # what vf compiled, against which the chart compares (ADR 224)
        values[env][JOB_VALUES] = job_values_digest(reads, {**values[env], "rows": rows})
    # counted before values.yaml takes what the environments share (a worker's kind, say)
    kinds = Counter(role_kinds(info.roles)) + Counter(worker_kinds(info.roles))
    neutral = {**neutral_values(rows), **neutral_roles(), **shared_workers(values)}
    neutral.update(shared_topology(values))
    neutral[JOB_READS] = reads  # the diff path's Jobs' (ADR 241: not _helpers.tpl)
    makers["values.yaml"] = partial(yamlout.dump, neutral)
    del shapes, singles, rows
    own = {f"values-{env}.yaml" for env in envs}
    for env in envs:
        makers[f"values-{env}.yaml"] = partial(yamlout.dump, values[env])
    makers["templates/environment.yaml"] = partial(environment_guard, envs)
    makers["values.schema.json"] = partial(_schema_text, values, nodes=info.nodes)
    shipped = role_templates()  # the same bytes in every flow's chart
    makers.update({path: partial(str, text) for path, text in shipped.items()})
    makers["templates/_helpers.tpl"] = partial(render_text, "_helpers.tpl", context={})
    context = _context(info, templates=templates, envs=envs, roles=dict(kinds))
    makers["templates/NOTES.txt"] = partial(render_text, "NOTES.txt", context=context)
    makers["README.md"] = partial(render_text, "README.md", context=context)
    makers["templates/tests/test-connection.yaml"] = partial(
        render_text, "test-connection.yaml", context=context
    )
    del templates  # each template's slots go as soon as its file is made
    digest = _Digest()
    for path in sorted(makers):
        text = makers.pop(path)()
        if path in own:  # one environment's values: not in the version every one reads
            yield f"{ROOT}/{path}", text
        elif path in shipped:
            yield f"{ROOT}/{path}", digest.of(path, text)
        else:
            yield f"{ROOT}/{path}", digest.of(path, guarded(path, text))
    yield f"{ROOT}/Chart.yaml", yamlout.dump(_chart_yaml(info, digest=digest.hexdigest()[:12]))


def _members(
    per_env: Mapping[str, Sequence[Obj]],
    *,
    info: ChartInfo,
    workers: Mapping[str, Mapping[str, str]],
) -> list[Member]:
    """Every object's template, each object of every environment matched to its key."""
    envs = sorted(per_env)
    namespaced: set[Key] = set()
    prepared = {env: _prepared(per_env[env], namespaced=namespaced) for env in envs}
    gens = generations({env: role_generation(info.roles.get(env) or {}) for env in envs})
    indexed, namespaced = matched_objects(prepared, gens=gens, namespaced=namespaced)
    del prepared
    # in key order, not each environment's: which environments have an object leaves the
    # rows' order and the shapes' numbers alone
    keys = sorted({k for env in envs for k in indexed[env]})
    where = _Where(envs=tuple(envs), namespaces=info.namespaces, workers=workers, gens=gens)
    return [
        _template(
            key,
            versions={e: indexed[e][key] for e in envs if key in indexed[e]},
            where=where,
            namespaced=key in namespaced,
        )
        for key in keys
    ]


def _all_values(
    templates: Sequence[Member],
    *,
    per_env: Mapping[str, Sequence[Obj]],
    info: ChartInfo,
) -> dict[str, Obj]:
    """Every environment's complete values, the role templates' among them (their
    workers' entries beside the diff path's in ``nodes``), and its planned Job and
    partitioned counts (in its own values file, not the schema every environment shares)."""
    envs = sorted(per_env)
    values = {
        env: {**_values(templates, env=env), **IMAGE_TAG_VALUES, **OVERRIDE_VALUES} for env in envs
    }
    for env in envs:
        roles = dict(info.roles.get(env) or neutral_roles())
        nodes = {**(values[env].get("nodes") or {}), **(roles.pop("nodes", None) or {})}
        values[env].update(roles)
        if nodes:
            values[env]["nodes"] = dict(sorted(nodes.items()))
    planned = planned_replicas(per_env, values, pinned=info.partitioned)
    if any(planned.values()):
        for env in envs:
            values[env][PLANNED_REPLICAS] = planned.get(env, {})
    return values


def _schema_text(values: Mapping[str, Obj], *, nodes: Sequence[str]) -> Chunks:
    return Chunks(json_chunks(values_schema(values, nodes=nodes), ascii=True))


class _Digest:
    """The digest of every chart file, path and text, in path order; a file in pieces is
    digested while its pieces are read, so each must be read before the next file."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self._reading = 0

    def of(self, path: str, text: FileText) -> FileText:
        if self._reading:
            raise AssertionError("a chart file's pieces were not read before the next file")
        if isinstance(text, str):
            self._sha.update(f"{path}\0{text}\0".encode())
            return text
        self._reading += 1
        return Chunks(self._pieces(path, text))

    def _pieces(self, path: str, text: Chunks) -> Iterator[str]:
        self._sha.update(f"{path}\0".encode())
        for piece in text.pieces:
            self._sha.update(piece.encode())
            yield piece
        self._sha.update(b"\0")
        self._reading -= 1

    def hexdigest(self) -> str:
        if self._reading:
            raise AssertionError("a chart file's pieces were not read before Chart.yaml")
        return self._sha.hexdigest()


def _with_release_slots(
    slots: list[Slot], *, versions: Mapping[str, Obj], namespaces: Mapping[str, str]
) -> list[Slot]:
    """``slots`` plus what Helm itself supplies: a Service name in the environment's
    namespace (``x.<ns>.svc``) follows the release's, and Helm's standard labels."""
    first = sorted(versions)[0]
    extra: list[Slot] = []
    marker = f".{namespaces[first]}.svc"
    for path, text in strings_holding(versions[first], marker):
        head, _, tail = text.partition(marker)
        if all(lookup(v, path) == f"{head}.{namespaces[e]}.svc{tail}" for e, v in versions.items()):
            key = (IN_RELEASE_NAMESPACE, head, tail)
            extra.append(Slot(path=path, values=dict.fromkeys(versions, text), key=key))
    if "labels" in versions[first]["metadata"]:
        for label, helm_key in _HELM_LABELS:
            extra.append(supplied(label, envs=versions, key=helm_key))
    covered = {s.path for s in extra}
    heads = {p[:1] for p in covered}  # a path lies below another only under the same field
    kept = [
        _templated(s, namespaces=namespaces)
        for s in slots
        if s.path not in covered and not (s.path[:1] in heads and below(s.path, covered))
    ]
    above = [k.path for k in kept if k.path[:1] in heads]
    return kept + [s for s in extra if not below(s.path, above)]


def _templated(slot: Slot, *, namespaces: Mapping[str, str]) -> Slot:
    """A value naming its environment's namespace (``x.<ns>.svc``) names the release's
    instead: the values hold ``{{ .Release.Namespace }}`` and the template renders them."""
    if slot.key[0].startswith("$") or not any(
        isinstance(v, str) and ".svc" in v for v in slot.values.values()
    ):
        return slot  # (a quick look first: few values name a Service)
    values, named = {}, False
    for env, value in slot.values.items():
        marker = f".{namespaces[env]}.svc"
        found = isinstance(value, str) and marker in value
        values[env] = value.replace(marker, ".{{ .Release.Namespace }}.svc") if found else value
        named = named or found
    if not named:
        return slot
    return Slot(path=slot.path, values=values, key=(TEMPLATED, *slot.key))


_HELM_LABELS = (
    (("metadata", "labels", "helm.sh/chart"), HELM_CHART_LABEL),
    (("metadata", "labels", MANAGED_BY), RELEASE_SERVICE),
)


@dataclass(frozen=True, kw_only=True)
class _Where:
    """What every object's template is made against: the environments, their namespaces
    and each node's worker environment."""

    envs: tuple[str, ...]
    namespaces: Mapping[str, str]
    workers: Mapping[str, Mapping[str, str]]
    gens: Mapping[str, str]  # each environment's BATCH generation, when they differ


def _template(key: Key, *, versions: dict[str, Obj], where: _Where, namespaced: bool) -> Member:
    names = tuple(sorted(versions))
    versions = aligned(versions)
    found = with_topology_slots(find_slots(versions), versions=versions, nodes=where.workers)
    base = versions[names[0]]  # read, never changed: object_template copies
    found = with_generation_names(found, versions=versions, gens=where.gens)
    found = with_job_name(found, versions=versions, key=key)
    slots = _with_release_slots(found, versions=versions, namespaces=where.namespaces)
    slots = retagged(slots, versions=versions)
    slots = with_replica_slots(slots, versions=versions)
    slots = keyed_by_generation(slots, base=base, key=key)
    if namespaced:
        slots.append(supplied(("metadata", "namespace"), envs=versions, key=RELEASE_NAMESPACE))
    return Member(
        key=key,
        base=base,
        slots=tuple(slots),
        present=current().chart_envs.setdefault(names, names),  # one tuple for each set
        partial=len(versions) < len(where.envs),
    )


def _resolve_keys(templates: Sequence[Member], *, envs: Sequence[str]) -> list[Member]:
    """Slots sharing a key must agree in every environment; the others get generated keys."""
    by_key: dict[ValueKey, list[Slot]] = {}
    for tpl in templates:
        for slot in tpl.slots:
            by_key.setdefault(slot.key, []).append(slot)
    clash = {
        key for key, slots in by_key.items() if len(slots) > 1 and not _agree(slots, envs=envs)
    }
    clash |= {key[:i] for key in by_key for i in range(1, len(key)) if key[:i] in by_key}
    out = []
    for tpl in templates:
        if not any(s.key in clash for s in tpl.slots):
            out.append(tpl)
            continue
        slots = tuple(
            Slot(path=s.path, values=s.values, key=generated_key(stable(tpl.key), path=s.path))
            if s.key in clash
            else s
            for s in tpl.slots
        )
        out.append(replace(tpl, slots=slots))
    return out


def _agree(slots: Sequence[Slot], *, envs: Sequence[str]) -> bool:
    for env in envs:
        seen = [s.values[env] for s in slots if env in s.values]
        if any(not same(v, other=seen[0]) for v in seen[1:]):
            return False
    return True


def _values(templates: Sequence[Member], *, env: str) -> Obj:
    """One environment's complete values: its name (which objects it has), and null for a
    field it lacks."""
    out: Obj = {"environment": env}
    for tpl in templates:
        for slot in tpl.slots:
            key = values_key(slot.key)
            if key is None:
                continue  # Helm or the template supplies it
            value = slot.values.get(env, ABSENT)
            _put(out, key=key, value=None if value is ABSENT else _copied(value), merge=True)
    return out


_ATOMIC = frozenset({str, int, float, bool, type(None)})


def _copied(value: Any) -> Any:
    """A value for the values tree: containers copied, so no two places share one."""
    return value if type(value) in _ATOMIC else copy.deepcopy(value)


def _put(tree: Obj, *, key: ValueKey, value: Any, merge: bool) -> None:
    for part in key[:-1]:
        if part not in tree:  # (no empty dict made for the sections that exist)
            tree[part] = {}
        tree = tree[part]
    if merge and key[-1] in tree and value is None:
        return  # another slot with this key already holds the environment's value
    tree[key[-1]] = value


def _context(
    info: ChartInfo, *, templates: Sequence[Member], envs: Sequence[str], roles: Mapping[str, int]
) -> dict[str, Any]:
    kinds = Counter(kind for kind, _ in (t.key for t in templates))
    kinds.update({kind: count for kind, count in roles.items() if count})
    return {
        "name": info.name,
        "flow_type": info.flow_type,
        "environments": [
            {
                "name": env,
                "namespace": info.namespaces[env],
                "kubernetes": info.kubernetes_versions[env],
            }
            for env in envs
        ],
        "nodes": list(info.nodes),
        "kinds": sorted(kinds.items()),
    }


def _chart_yaml(info: ChartInfo, *, digest: str) -> Obj:
    """Chart.yaml; ``digest`` is of every file every environment reads (not
    ``values-<env>.yaml``, ADR 188), and the version increases
    exactly when it differs from the tree's current chart (``vf.emit.helm.version``)."""
    oldest = min(
        info.kubernetes_versions.values(), key=lambda v: tuple(int(p) for p in v.split("."))
    )
    return {
        "apiVersion": "v2",
        "name": info.name,
        "description": f"vf flow {info.name} ({info.flow_type}), generated by vf compile",
        "type": "application",
        "version": chart_version(info.previous, digest=digest),
        "appVersion": __version__,  # the vf that compiled the flow, whose runtime it runs
        "kubeVersion": f">={oldest}.0-0",
        "annotations": {DIGEST_ANNOTATION: digest},
    }
