"""The delivery trees beside the Kustomize one: the Helm chart and the GitOps manifests."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from vf.config.delivery import GitOps
from vf.emit.gitops.manifests import emit_gitops
from vf.emit.helm.chart import ChartInfo, chart_files, emit_helm
from vf.ir.graph import Graph
from vf.ir.plan import Plan
from vf.textio.filetext import FileText

Tree = dict[str, str]


def emit_delivery(
    graph: Graph,
    *,
    plans: Sequence[Plan],
    objects: Mapping[str, Sequence[dict[str, Any]]],
    gitops: GitOps | None,
) -> Tree:
    """``chart/`` (always) and ``gitops/`` (when vf.yaml has ``gitops:``)."""
    chart = emit_helm(objects, info=_chart_info(graph, plans=plans))
    return chart | emit_gitops(gitops, plans=plans, objects=objects)


def delivery_files(
    graph: Graph,
    *,
    plans: Sequence[Plan],
    objects: Mapping[str, Sequence[dict[str, Any]]],
    gitops: GitOps | None,
) -> Iterator[tuple[str, FileText]]:
    """The files of ``emit_delivery`` one at a time, so none needs to stay in memory."""
    yield from chart_files(objects, info=_chart_info(graph, plans=plans))
    yield from emit_gitops(gitops, plans=plans, objects=objects).items()


def _chart_info(graph: Graph, *, plans: Sequence[Plan]) -> ChartInfo:
    return ChartInfo(
        name=plans[0].flow_id,
        flow_type=graph.flow_type,
        kubernetes_versions={p.environment: p.kubernetes_version for p in plans},
        namespaces={p.environment: p.namespace for p in plans},
        nodes=tuple(node.name for node in graph.nodes),
    )
