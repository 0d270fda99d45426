"""Emit ``chart/``, whose ``helm template`` with ``values-<env>.yaml`` renders that
environment's overlay (ADR 245, 257): each environment's values from its role values,
``values.yaml`` of what they share, the schema, the shipped templates and ``Chart.yaml``.
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
from vf.emit.helm.schema import schema_text
from vf.emit.helm.version import DIGEST_ANNOTATION, ChartRelease, chart_version
from vf.emit.helm.workers import worker_kinds
from vf.resources import templates as shipped_text
from vf.textio import yamlout
from vf.textio.objects import Obj

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
    shared: Obj = {"environment": None, **IMAGE_TAG_VALUES, **OVERRIDE_VALUES}
    shared.update({section: {} for section in (*SECTIONS, "workerPod", "workers")})
    for where in _SHARED if values else ():
        shared.update(_hoist([values[env] for env in sorted(values)], where))
    makers: dict[str, Callable[[], str]] = {
        "README.md": partial(_readme, info, envs=sorted(values), kinds=kinds),
        "values.schema.json": partial(schema_text, values, nodes=info.nodes),
        "values.yaml": partial(yamlout.dump, shared),
        **{path: partial(str, text) for path, text in shipped_templates().items()},
    }
    own = {f"values-{env}.yaml": partial(yamlout.dump, values[env]) for env in values}
    digest, makers = hashlib.sha256(), makers | own
    for path in sorted(makers):
        text = makers.pop(path)()
        if path not in own:  # one environment's values: not in the version every one reads
            digest.update(f"{path}\0{text}\0".encode())
        yield f"{ROOT}/{path}", text
    yield f"{ROOT}/Chart.yaml", yamlout.dump(_chart_yaml(info, digest=digest.hexdigest()[:12]))


def _check_roles(per_env: Mapping[str, Sequence[Obj]]) -> None:
    """Every object but the Namespace (the release's, ADR 82) is a role template's: an
    object of another is a renderer's that the chart would silently lose."""
    for env, objects in per_env.items():
        for obj in objects:
            if obj.get("kind") != "Namespace" and not is_role_object(obj):
                name = obj["metadata"].get("name")
                raise AssertionError(f"{env}: {obj.get('kind')}/{name} has no role template")


def _all_values(per_env: Mapping[str, Sequence[Obj]], *, info: ChartInfo) -> dict[str, Obj]:
    """Every environment's complete values: its name, the global overrides (empty), its
    role values, ``plannedReplicas`` and the digest of what its Jobs read."""
    values: dict[str, Obj] = {}
    for env in sorted(per_env):
        roles = info.roles.get(env) or {section: {} for section in SECTIONS}
        values[env] = {"environment": env, **IMAGE_TAG_VALUES, **OVERRIDE_VALUES, **roles}
        if not values[env].get("nodes"):
            values[env].pop("nodes", None)
    # the count of each Job, StatefulSet and partitioned worker, which a --set may not
    # change: a Job's name and indexes, the readers, topology and run id follow it (ADR 154,
    # 176); in each environment's own file, not the schema every environment shares
    planned = {
        env: {
            node: own["nodes"][node]["replicas"]
            for node, kind in worker_kinds(own).items()
            if kind in ("Job", "StatefulSet") or node in info.partitioned
        }
        for env, own in values.items()
    }
    for env, own in values.items():
        if any(planned.values()):
            own[PLANNED_REPLICAS] = planned[env]
        own[JOB_VALUES] = job_values_digest(own)  # as compiled, which the chart compares
    return values


def _hoist(tops: Sequence[Obj], path: Sequence[str]) -> Obj:
    """What every one of ``tops`` holds alike at ``path`` (``*``: each key of the first's),
    taken out of them (an entry of ``*`` left with nothing goes). Helm merges it back
    under each environment's values."""
    out: Obj = {}
    for key in list(tops[0]) if path[0] == "*" else [path[0]]:
        held: list[Any] = [top.get(key) for top in tops]
        if any(each is None for each in held):
            continue
        if len(path) == 1 and all(each == held[0] for each in held):
            out[key] = held[0]
            for top in tops:
                del top[key]
        elif len(path) > 1 and (inner := _hoist(held, path[1:])):
            out[key] = inner
            for top in tops:
                if path[0] == "*" and not top[key]:
                    del top[key]
    return out


def _readme(info: ChartInfo, *, envs: Sequence[str], kinds: Counter[str]) -> str:
    """``templates/helm/README.md.j2``; ``|go`` escapes user text that Helm would read as
    its own ``{{ }}``."""
    environment = shipped_text("helm")
    environment.filters["go"] = lambda text: text.replace("{{", '{{ "{{" }}')
    return environment.get_template("README.md.j2").render(
        name=info.name,
        flow_type=info.flow_type,
        environments=[
            {"name": e, "namespace": info.namespaces[e], "kubernetes": info.kubernetes_versions[e]}
            for e in envs
        ],
        nodes=list(info.nodes),
        kinds=sorted((kind, count) for kind, count in kinds.items() if count),
    )


def _chart_yaml(info: ChartInfo, *, digest: str) -> Obj:
    """Chart.yaml; ``digest`` is of every file every environment reads (not
    ``values-<env>.yaml``, ADR 188), and the version increases
    exactly when it differs from the tree's current chart (``vf.emit.helm.version``)."""
    oldest = min(info.kubernetes_versions.values(), key=lambda v: [int(p) for p in v.split(".")])
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
