"""The delivery trees beside the Kustomize one: the Helm chart and the GitOps manifests."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from vf.emit.helm.chart import ChartInfo, chart_files, emit_helm
from vf.emit.helm.version import ChartRelease
from vf.ir.delivery import GitOps
from vf.ir.plan import Plan
from vf.textio.filetext import FileText

Tree = dict[str, str]


def emit_delivery(
    *,
    plans: Sequence[Plan],
    objects: Mapping[str, Sequence[dict[str, Any]]],
    gitops: GitOps | None,
) -> Tree:
    """``chart/`` (always) and ``gitops/`` (when vf.yaml has ``gitops:``)."""
    chart = emit_helm(objects, info=_chart_info(plans))
    return chart | _gitops(gitops, plans=plans, objects=objects)


def delivery_files(
    *,
    plans: Sequence[Plan],
    objects: Mapping[str, Sequence[dict[str, Any]]],
    gitops: GitOps | None,
    chart: ChartRelease | None = None,
) -> Iterator[tuple[str, FileText]]:
    """The files of ``emit_delivery`` one at a time, so none needs to stay in memory;
    ``chart`` is the chart the output tree holds now, which the new version counts on from."""
    yield from chart_files(objects, info=_chart_info(plans, previous=chart))
    yield from _gitops(gitops, plans=plans, objects=objects).items()


def _gitops(
    gitops: GitOps | None, *, plans: Sequence[Plan], objects: Mapping[str, Sequence[dict[str, Any]]]
) -> Tree:
    """``gitops/``: its emitters load only for a vf.yaml that has a ``gitops:`` section."""
    if gitops is None:
        return {}
    from vf.emit.gitops.manifests import emit_gitops

    return emit_gitops(gitops, plans=plans, objects=objects)


def _chart_info(plans: Sequence[Plan], *, previous: ChartRelease | None = None) -> ChartInfo:
    """What the chart says of the flow, from the plans alone (every plan has every node)."""
    return ChartInfo(
        name=plans[0].flow_id,
        flow_type=plans[0].flow_type,
        kubernetes_versions={p.environment: p.kubernetes_version for p in plans},
        namespaces={p.environment: p.namespace for p in plans},
        nodes=tuple(workload.node for workload in plans[0].workloads),
        previous=previous,
    )
