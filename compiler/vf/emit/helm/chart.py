"""Emit ``chart/``: a Helm chart that renders, with ``values-<env>.yaml``, the objects of
that environment's overlay.

Every object is a role template's (``templates/helm/roles/``, the same bytes in every
flow's chart) ranging over the values that ``vf.emit.helm.roles`` builds from each
environment's plan; a flow's chart differs from another's only in ``Chart.yaml`` and its
values. This module assembles the chart: each environment's values, ``values.yaml`` (what
the environments share), the schema, the shipped templates and ``Chart.yaml`` with its
version digest. The namespace is the release's; the provision Job is a Helm hook here and
only here.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from vf import __version__
from vf.emit.helm.job_values import JOB_VALUES, job_values_digest
from vf.emit.helm.overrides import IMAGE_TAG_VALUES, OVERRIDE_VALUES
from vf.emit.helm.roles import SECTIONS, is_role_object, role_kinds, shipped_templates
from vf.emit.helm.schema import values_schema
from vf.emit.helm.version import DIGEST_ANNOTATION, ChartRelease, chart_version
from vf.resources import templates as shipped_text
from vf.textio import yamlout
from vf.textio.jsontext import json_text
from vf.textio.objects import Obj
from vf_runtime.labels import NODE_LABEL, labels_of

Tree = dict[str, str]
File = tuple[str, str]
ROOT = "chart"
PLANNED_REPLICAS = "plannedReplicas"  # per environment: the counts a --set must keep
# what values.yaml holds where every environment's values hold it alike ("*": each key):
# the release holds every values file, and these are the largest part of them
_SHARED = (
    ("workers", "*", "*"),  # a node's class, params, parents…
    ("podDisruptionBudgets", "*", "*"),  # a budget's component…
    ("workerPod", "defaults"),
    ("topology", "shards"),  # the nodes' records
)


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


def emit_helm(per_env: Mapping[str, Sequence[Obj]], *, info: ChartInfo) -> Tree:
    """Every file of ``chart/`` keyed by its path in the output tree."""
    return dict(sorted(chart_files(per_env, info=info)))


def chart_files(per_env: Mapping[str, Sequence[Obj]], *, info: ChartInfo) -> Iterator[File]:
    """The files of ``emit_helm`` one at a time, in path order and ``Chart.yaml`` last (its
    version digests every file but the environments' values, ADR 188), each made only when
    its turn comes."""
    _check_roles(per_env)
    values = _all_values(per_env, info=info)
    # counted before values.yaml takes what the environments share (a worker's kind, say)
    kinds = role_kinds(info.roles)
    context = _context(info, envs=sorted(values), kinds=kinds)
    shared: Obj = {"environment": None, **IMAGE_TAG_VALUES, **OVERRIDE_VALUES}
    shared.update({section: {} for section in (*SECTIONS, "workerPod", "workers")})
    for where in _SHARED if values else ():
        shared.update(_hoist([values[env] for env in sorted(values)], where))
    makers: dict[str, Callable[[], str]] = {
        "README.md": partial(render_text, "README.md", context=context),
        "values.schema.json": partial(_schema_text, values, nodes=info.nodes),
        "values.yaml": partial(yamlout.dump, shared),
        **{path: partial(str, text) for path, text in shipped_templates().items()},
    }
    own = {f"values-{env}.yaml": partial(yamlout.dump, values[env]) for env in values}
    digest = hashlib.sha256()
    for path in sorted({*makers, *own}):
        if path in own:  # one environment's values: not in the version every one reads
            yield f"{ROOT}/{path}", own.pop(path)()
            continue
        text = makers.pop(path)()
        digest.update(f"{path}\0{text}\0".encode())
        yield f"{ROOT}/{path}", text
    yield f"{ROOT}/Chart.yaml", yamlout.dump(_chart_yaml(info, digest=digest.hexdigest()[:12]))


def _check_roles(per_env: Mapping[str, Sequence[Obj]]) -> None:
    """Every object but the Namespace is a role template's. The Namespace is left out: the
    release's namespace exists before any object of the release (``--create-namespace``),
    and Helm cannot adopt it. An object of another kind is a renderer's that no role
    template renders yet, which the chart would silently lose."""
    for env, objects in per_env.items():
        for obj in objects:
            if obj.get("kind") != "Namespace" and not is_role_object(obj):
                name = obj["metadata"].get("name")
                raise AssertionError(f"{env}: {obj.get('kind')}/{name} has no role template")


def _all_values(per_env: Mapping[str, Sequence[Obj]], *, info: ChartInfo) -> dict[str, Obj]:
    """Every environment's complete values: its name, the global overrides (empty), its
    role values, its planned Job and partitioned counts (in its own values file, not the
    schema every environment shares) and the digest of what its Jobs read."""
    values: dict[str, Obj] = {}
    for env in sorted(per_env):
        roles = info.roles.get(env) or {section: {} for section in SECTIONS}
        values[env] = {"environment": env, **IMAGE_TAG_VALUES, **OVERRIDE_VALUES, **roles}
        if not values[env].get("nodes"):
            values[env].pop("nodes", None)
    planned = _planned_replicas(per_env, values, pinned=info.partitioned)
    for env, own in values.items():
        if planned:
            own[PLANNED_REPLICAS] = planned.get(env, {})
        own[JOB_VALUES] = job_values_digest(own)  # as compiled, which the chart compares
    return values


def _planned_replicas(
    per_env: Mapping[str, Sequence[Obj]], values: Mapping[str, Obj], *, pinned: frozenset[str]
) -> dict[str, dict[str, int]]:
    """Per environment, the planned count of each node whose workload is a Job or a
    StatefulSet, or whose node is in ``pinned``: a Job's count is part of its name's tag
    and its pods' indexes, a partitioned worker's of its parents' readers, the topology and
    the run id, also while it is one replica of a Deployment (ADR 154, 176). The chart's
    ``templates/environment.yaml`` refuses a ``--set`` of another."""
    out: dict[str, dict[str, int]] = {}
    for env, objects in per_env.items():
        nodes = values[env].get("nodes") or {}
        for obj in objects:
            node = str(labels_of(obj).get(NODE_LABEL))
            count = (nodes.get(node) or {}).get("replicas")
            pins = obj.get("kind") in ("Job", "StatefulSet") or node in pinned
            if pins and isinstance(count, int):
                out.setdefault(env, {})[node] = count
    return out


def _hoist(tops: Sequence[Obj], path: Sequence[str]) -> Obj:
    """What every one of ``tops`` holds alike at ``path`` (``*``: each key of the first's),
    taken out of them (an entry of ``*`` left with nothing goes). Helm merges it back
    under each environment's values."""
    out: Obj = {}
    for key in list(tops[0]) if path[0] == "*" else [path[0]]:
        held: list[Any] = [top.get(key) for top in tops]
        if any(each is None for each in held):
            continue
        if len(path) == 1:
            if all(each == held[0] for each in held):
                out[key] = held[0]
                for top in tops:
                    del top[key]
            continue
        inner = _hoist(held, path[1:])
        if inner:
            out[key] = inner
            for top in tops:
                if path[0] == "*" and not top[key]:
                    del top[key]
    return out


def _schema_text(values: Mapping[str, Obj], *, nodes: Sequence[str]) -> str:
    return json_text(values_schema(values, nodes=nodes), ascii=True)


def escape_go(text: str) -> str:
    """Text that a Go template prints back unchanged."""
    return text.replace("{{", '{{ "{{" }}')


def render_text(name: str, *, context: Mapping[str, Any]) -> str:
    """One shipped text template (``templates/helm/<name>.j2``) rendered with ``context``;
    ``|go`` escapes user text for Go templates, so Helm's ``{{ }}`` passes through."""
    environment = shipped_text("helm")
    environment.filters["go"] = escape_go
    return environment.get_template(f"{name}.j2").render(context)


def _context(info: ChartInfo, *, envs: Sequence[str], kinds: Counter[str]) -> dict[str, Any]:
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
        "kinds": sorted((kind, count) for kind, count in kinds.items() if count),
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
