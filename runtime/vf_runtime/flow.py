"""A Flow: the consumers of a pipeline, from which the whole graph is reachable."""

from __future__ import annotations

from collections.abc import Iterable

from vf_runtime.constants import REALTIME
from vf_runtime.errors import AuthoringError
from vf_runtime.nodes import Node
from vf_runtime.policies import check_flow_type


class Flow:
    """The pipeline: its consumers, its flow type and an optional explicit flow id."""

    def __init__(
        self,
        consumers: Node | Iterable[Node],
        *,
        flow_type: str = REALTIME,
        flow_id: str | None = None,
    ) -> None:
        items = (consumers,) if isinstance(consumers, Node) else tuple(consumers)
        if not items:
            raise AuthoringError(
                "VF_GRAPH_EMPTY",
                "Flow() was given no consumers",
                "pass the flow's consumers: Flow([sink_a, sink_b], flow_type=BATCH)",
            )
        for item in items:
            if not isinstance(item, Node):
                raise AuthoringError(
                    "VF_GRAPH_PARENT_TYPE",
                    f"Flow() got {item!r}, which is not a vf node",
                    "pass Consumer instances to Flow()",
                )
        self.consumers: tuple[Node, ...] = items
        self.flow_type = check_flow_type(flow_type)
        if flow_id is not None and not isinstance(flow_id, str):
            raise AuthoringError(
                "VF_GRAPH_FLOW_ID",
                f"flow_id={flow_id!r} must be a string",
                "pass flow_id as a short lowercase name, e.g. 'cameras'",
            )
        self.flow_id = flow_id
