"""What every per-node decision of one environment shares: names, replicas, run labels."""

from __future__ import annotations

from collections.abc import Mapping

from vf.config.targets import Environment
from vf.ir.graph import Graph, NodeIR
from vf.ir.plan import Pairs
from vf_runtime.broker.naming import RunNames


class PlanContext:
    """What every per-node decision of one environment shares."""

    def __init__(
        self,
        *,
        graph: Graph,
        env: Environment,
        flow_id: str,
        run_id: str,
        replicas: Mapping[str, int],
        run_labels: Pairs,
    ) -> None:
        self.graph = graph
        self.env = env
        self.flow_id = flow_id
        self.run_id = run_id
        self.replicas = replicas
        self.run_labels = run_labels
        self.nodes = {node.name: node for node in graph.nodes}

    def partitioned(self, node: NodeIR) -> bool:
        return node.partition_by is not None and self.replicas[node.name] > 1

    def broker_names(self, generation: str | None) -> RunNames:
        """The run's broker names, from the runtime's one implementation of them."""
        return RunNames(self.flow_id, self.run_id, generation or "")
