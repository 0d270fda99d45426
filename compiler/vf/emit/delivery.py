"""What the delivery trees beside the Kustomize one take from the plans: ``gitops/`` and
the facts ``chart/`` states (``vf.emit.helm.chart`` assembles the chart from the role values)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from vf.emit.helm.chart import ChartInfo
from vf.emit.helm.roles import role_values
from vf.emit.helm.version import ChartRelease
from vf.emit.retired import Retired
from vf.emit.shards import Shard
from vf.ir.delivery import GitOps
from vf.ir.plan import Plan
from vf.textio.filetext import FileText


def gitops_files(
    gitops: GitOps | None,
    *,
    plans: Sequence[Plan],
    objects: Mapping[str, Sequence[dict[str, Any]]],
    shards: Mapping[str, Sequence[Shard]],
    retired: Mapping[str, Retired] | None = None,
) -> Iterator[tuple[str, FileText]]:
    """``gitops/``, when vf.yaml has a ``gitops:`` section (its emitters load only then);
    ``shards``: those of each environment delivered in shards; ``retired``: the committed
    shards of each environment that no longer is (``vf.emit.retired``)."""
    if gitops is None:
        return
    from vf.emit.gitops.manifests import emit_gitops

    made = emit_gitops(gitops, plans=plans, objects=objects, shards=shards, retired=retired)
    yield from made.items()


def chart_info(
    plans: Sequence[Plan],
    *,
    previous: ChartRelease | None = None,
    partitioned: frozenset[str] = frozenset(),
) -> ChartInfo:
    """What ``chart/`` says of the flow, from the plans (every plan has every node) and the
    nodes with ``partition_by``; ``previous`` is the chart the output tree holds now, which
    the new version counts on."""
    return ChartInfo(
        name=plans[0].flow_id,
        flow_type=plans[0].flow_type,
        kubernetes_versions={p.environment: p.kubernetes_version for p in plans},
        namespaces={p.environment: p.namespace for p in plans},
        nodes=tuple(workload.node for workload in plans[0].workloads),
        partitioned=partitioned,
        previous=previous,
        roles={p.environment: role_values(p) for p in plans},
    )


ValuesMap = tuple[str, Callable[[str], str]]


def flux_values_maps(gitops: GitOps | None, *, plans: Sequence[Plan]) -> dict[str, ValuesMap]:
    """For a tree whose Flux HelmReleases read each environment's values from a ConfigMap
    (ADR 188): ``chart/values-<env>.yaml`` → the ConfigMap's path and what makes its text
    from the values file's."""
    if gitops is None or gitops.flux is None or not gitops.flux.helm_release:
        return {}
    from vf.emit.gitops.flux_helm import values_config_map, values_file

    flux = gitops.flux
    return {
        f"chart/values-{p.environment}.yaml": (
            f"gitops/flux/{values_file(p.environment)}",
            partial(values_config_map, flux=flux, flow_id=p.flow_id, env=p.environment),
        )
        for p in plans
    }
