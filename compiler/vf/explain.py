"""A human summary of the plans: what will run where, and what vf warns about."""

from __future__ import annotations

from vf.pipeline import CompileResult


def explain(result: CompileResult) -> str:
    """Nodes, workload kinds, replicas, images, channels and warnings, per environment."""
    graph = result.graph
    lines = [f"flow {result.plans[0].flow_id} ({graph.flow_type}), {len(graph.nodes)} nodes"]
    for plan in result.plans:
        lines.append("")
        lines.append(
            f"environment {plan.environment}: namespace {plan.namespace}, "
            f"Kubernetes {plan.kubernetes_version}, run {plan.run_id} ({plan.run_id_source})"
        )
        for workload in plan.workloads:
            node = next(n for n in graph.nodes if n.name == workload.node)
            parents = ", ".join(node.parents) or "-"
            extra = f", partition_by {node.partition_by}" if node.partition_by else ""
            lines.append(
                f"  {workload.node}: {workload.node_kind} → {workload.kind} x{workload.replicas}"
                f", image {workload.image}, parents {parents}{extra}"
            )
        for channel in plan.channels:
            lines.append(
                f"  channel {channel.node}: {channel.profile}, stream {channel.stream}, "
                f"{len(channel.readers)} reader(s)"
            )
        for warning in plan.warnings:
            lines.append(f"  warning: {warning}")
    return "\n".join(lines) + "\n"
