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
from vf.emit.helm.planned import PLANNED_REPLICAS, neutral_values, planned_replicas
from vf.emit.helm.provision_roles import shared_topology
from vf.emit.helm.roles import is_role_object, neutral_roles, role_kinds, shipped_templates
from vf.emit.helm.schema import values_schema
from vf.emit.helm.version import DIGEST_ANNOTATION, ChartRelease, chart_version
from vf.emit.helm.workers import shared_workers, worker_kinds
from vf.resources import templates as shipped_text
from vf.textio import yamlout
from vf.textio.filetext import Chunks, FileText, whole
from vf.textio.jsontext import json_chunks
from vf.textio.objects import Obj

Tree = dict[str, str]
File = tuple[str, FileText]
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


def emit_helm(per_env: Mapping[str, Sequence[Obj]], *, info: ChartInfo) -> Tree:
    """Every file of ``chart/`` keyed by its path in the output tree."""
    return dict(sorted((path, whole(text)) for path, text in chart_files(per_env, info=info)))


def chart_files(per_env: Mapping[str, Sequence[Obj]], *, info: ChartInfo) -> Iterator[File]:
    """The files of ``emit_helm`` one at a time, in path order and ``Chart.yaml`` last (its
    version digests every file but the environments' values, ADR 188), so none needs to
    stay in memory."""
    envs = sorted(per_env)
    _check_roles(per_env)
    values = _all_values(per_env, info=info)
    for env in envs:  # what vf compiled, against which the chart compares (ADR 224)
        values[env][JOB_VALUES] = job_values_digest(values[env])
    # counted before values.yaml takes what the environments share (a worker's kind, say)
    kinds = Counter(role_kinds(info.roles)) + Counter(worker_kinds(info.roles))
    neutral = {**neutral_values(), **neutral_roles(), **shared_workers(values)}
    neutral.update(shared_topology(values))
    makers: dict[str, Callable[[], FileText]] = {"values.yaml": partial(yamlout.dump, neutral)}
    own = {f"values-{env}.yaml" for env in envs}
    for env in envs:
        makers[f"values-{env}.yaml"] = partial(yamlout.dump, values[env])
    makers["values.schema.json"] = partial(_schema_text, values, nodes=info.nodes)
    shipped = shipped_templates()  # the same bytes in every flow's chart
    makers.update({path: partial(str, text) for path, text in shipped.items()})
    context = _context(info, envs=envs, kinds=dict(kinds))
    makers["README.md"] = partial(render_text, "README.md", context=context)
    digest = _Digest()
    for path in sorted(makers):
        text = makers.pop(path)()
        if path in own:  # one environment's values: not in the version every one reads
            yield f"{ROOT}/{path}", text
        else:
            yield f"{ROOT}/{path}", digest.of(path, text)
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
    role values, and its planned Job and partitioned counts (in its own values file, not
    the schema every environment shares)."""
    values: dict[str, Obj] = {}
    for env in sorted(per_env):
        roles = dict(info.roles.get(env) or neutral_roles())
        nodes = roles.pop("nodes", None)
        values[env] = {"environment": env, **IMAGE_TAG_VALUES, **OVERRIDE_VALUES, **roles}
        if nodes:
            values[env]["nodes"] = dict(sorted(nodes.items()))
    planned = planned_replicas(per_env, values, pinned=info.partitioned)
    if any(planned.values()):
        for env, own in values.items():
            own[PLANNED_REPLICAS] = planned.get(env, {})
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


def escape_go(text: str) -> str:
    """Text that a Go template prints back unchanged."""
    return text.replace("{{", '{{ "{{" }}')


def render_text(name: str, *, context: Mapping[str, Any]) -> str:
    """One shipped text template (``templates/helm/<name>.j2``) rendered with ``context``;
    ``|go`` escapes user text for Go templates, so Helm's ``{{ }}`` passes through."""
    environment = shipped_text("helm")
    environment.filters["go"] = escape_go
    return environment.get_template(f"{name}.j2").render(context)


def _context(info: ChartInfo, *, envs: Sequence[str], kinds: Mapping[str, int]) -> dict[str, Any]:
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
