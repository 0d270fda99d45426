"""The graph IR: a frozen, validated view of the user's Flow (no user objects inside)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from vf_runtime.components import ComponentSpec
from vf_runtime.constants import DeviceType, FlowType, NodeKind
from vf_runtime.policies import DeliveryPolicy, JoinPolicy

_NODE_KINDS: dict[str, NodeKind] = {k: k for k in ("producer", "processor", "consumer")}


def node_kind(kind: str) -> NodeKind:
    """An authoring class's ``kind`` as the IR's closed set (KeyError for the bare base)."""
    return _NODE_KINDS[kind]


@dataclass(frozen=True, kw_only=True)
class NodeIR:
    """One node of the graph, with every field the planner needs and nothing live."""

    name: str
    kind: NodeKind
    node_class: str
    params_json: str
    parents: tuple[str, ...]
    children: tuple[str, ...]
    nb_tasks: int
    device_type: DeviceType
    gpu_count: int
    gpu_memory_gib: float | None
    # seconds the node's open() takes to load (a model); None: starts at once
    warmup_seconds: int | None
    is_finite: bool
    image: str | None
    partition_by: str | None
    join_policy: JoinPolicy | None
    delivery: DeliveryPolicy
    delivery_declared: bool
    idempotent: bool
    # a producer's ``replayable = True``: a restart re-emits the same items (MSGID-4)
    replayable: bool
    site: str
    component: ComponentSpec | None = None  # set for a native component (VF_COMPONENT_REF)


@dataclass(frozen=True, kw_only=True)
class Graph:
    """The whole flow: nodes in a stable topological order (ties broken by name)."""

    flow_id: str | None
    flow_type: FlowType
    source_stem: str
    nodes: tuple[NodeIR, ...]

    def node(self, name: str) -> NodeIR:
        """The node called ``name`` (KeyError when there is none), found in constant time."""
        return self._by_name[name]

    @cached_property
    def _by_name(self) -> dict[str, NodeIR]:
        index: dict[str, NodeIR] = {}
        for item in self.nodes:
            index.setdefault(item.name, item)
        return index
