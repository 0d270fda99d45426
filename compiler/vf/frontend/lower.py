"""Lower a user's Flow to the frozen Graph IR, reporting every graph rule broken in one pass."""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from vf import names
from vf.errors import Problem, raise_if
from vf.frontend.graph_checks import identity_problems
from vf.frontend.load import FALLBACK_MODULE
from vf.frontend.node_checks import (
    check_gpu_memory,
    check_join_rules,
    check_strings,
    check_warmup,
    positive_int,
)
from vf.frontend.params import json_problem, safe_repr
from vf.ir.graph import Graph, NodeIR, node_kind
from vf.textio.jsontext import compact_json
from vf_runtime import Consumer, Flow, Node, Processor, Producer
from vf_runtime.components import component_params, component_spec
from vf_runtime.constants import DEVICE_TYPES
from vf_runtime.policies import DeliveryPolicy, JoinPolicy
from vf_runtime.signature import arity_problem

# The most replicas of one node, as vf.yaml's replicas: allow; an Indexed Job allows
# 100,000 completions, and each replica is also a broker consumer and a pod.
MAX_NB_TASKS = 1000
# Keywords of the base classes: carried by dedicated VF_* variables, not by the params.
BASE_KEYWORDS = frozenset(
    {
        "name",
        "image",
        "is_finite",
        "nb_tasks",
        "device_type",
        "gpu_count",
        "gpu_memory_gib",
        "warmup_seconds",
        "partition_by",
        "join_policy",
        "delivery",
        "idempotent",
    }
)


@dataclass
class _Scan:
    """Mutable state of one lowering pass."""

    problems: list[Problem] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)

    def add(self, code: str, what: str, remedy: str, where: str = "") -> None:
        self.problems.append(Problem(code=code, what=what, remedy=remedy, where=where))


def site_of(node: Node, *, wired: bool = False) -> str:
    """The user's ``file:line`` where the node was constructed (``wired``: where it was
    given its parents, when it was)."""
    site = getattr(node, "_vf_wired_at", None) if wired else None
    site = site or getattr(node, "_vf_site", None)
    if site is None:
        return type(node).__name__
    path, line = site
    return f"{_display_path(path, os.getcwd())}:{line}"


def _display_path(path: str, cwd: str) -> str:
    """``path`` relative to ``cwd`` when it lies below it, else as given."""
    rel = os.path.relpath(path, cwd)
    return path if rel.startswith("..") else rel


def lower(flow: Flow, *, source_stem: str) -> Graph:
    """Validate ``flow`` against every graph rule and return its Graph IR."""
    scan = _Scan()
    reachable = _reachable(flow)
    _check_shape(flow, reachable, scan)
    _assign_names(reachable, scan)
    order = _topological(reachable, scan)
    children: dict[int, list[str]] = {id(n): [] for n in reachable}
    for node in order:
        for parent in node.parents:
            children[id(parent)].append(scan.names[id(node)])
    irs = [_lower_node(n, sorted(children[id(n)]), flow.flow_type, scan) for n in order]
    scan.problems.extend(identity_problems(irs))
    _check_flow_id(flow.flow_id, scan)
    raise_if(scan.problems)
    return Graph(
        flow_id=flow.flow_id, flow_type=flow.flow_type, source_stem=source_stem, nodes=tuple(irs)
    )


def _reachable(flow: Flow) -> list[Node]:
    """Every node reachable from the consumers by parent links, without recursion."""
    seen: dict[int, Node] = {}
    stack = list(flow.consumers)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        stack.extend(node.parents)
    return list(seen.values())


def _check_shape(flow: Flow, reachable: Iterable[Node], scan: _Scan) -> None:
    for node in flow.consumers:
        if not isinstance(node, Consumer):
            scan.add(
                "VF_GRAPH_NOT_CONSUMER",
                f"{safe_repr(node)} is passed to Flow() but is not a Consumer",
                "pass only Consumer nodes to Flow(); processors are reached through them",
                site_of(node),
            )
    for node in reachable:
        if not isinstance(node, Producer | Processor | Consumer):
            scan.add(
                "VF_GRAPH_NODE_TYPE",
                f"{safe_repr(node)} subclasses Node directly",
                "subclass Producer, Processor or Consumer",
                site_of(node),
            )
        elif isinstance(node, Producer) and node.parents:
            scan.add(
                "VF_GRAPH_PRODUCER_PARENTS",
                f"producer {safe_repr(node)} was given parents",
                "producers are roots; make it a Processor if it needs inputs",
                site_of(node),
            )
        elif not isinstance(node, Producer) and not node.parents:
            scan.add(
                "VF_GRAPH_ROOT",
                f"{safe_repr(node)} has no parents but is not a Producer; "
                "every root must be a Producer",
                "wire it to its parents with node(parent) or make it a Producer",
                site_of(node),
            )
        for parent in node.parents:
            if isinstance(parent, Consumer):
                scan.add(
                    "VF_GRAPH_CONSUMER_CHILD",
                    f"consumer {safe_repr(parent)} is used as a parent of {safe_repr(node)}; "
                    "consumers are leaves",
                    "make the parent a Processor, or add a separate Consumer",
                    site_of(node),
                )


def _assign_names(reachable: list[Node], scan: _Scan) -> None:
    by_class: dict[type, list[Node]] = {}
    for node in reachable:
        if node.name is None:
            by_class.setdefault(type(node), []).append(node)
    for node in reachable:
        if node.name is not None:
            if not isinstance(node.name, str) or not names.NODE_NAME.match(node.name):
                scan.add(
                    "VF_GRAPH_NAME",
                    f"node name {safe_repr(node.name)} is not a valid name",
                    "use 1-128 letters, digits, '-', '_' or '.', starting and ending alnum",
                    site_of(node),
                )
            scan.names[id(node)] = str(node.name)
            continue
        cls = type(node)
        if len(by_class[cls]) > 1:
            scan.add(
                "VF_GRAPH_AMBIGUOUS_NAME",
                f"{len(by_class[cls])} nodes of class {cls.__name__} have no name=",
                f"pass a distinct name= to each {cls.__name__}",
                site_of(node),
            )
        scan.names[id(node)] = names.default_node_name(cls.__name__)
    seen: dict[str, list[Node]] = {}
    for node in reachable:
        seen.setdefault(scan.names[id(node)], []).append(node)
    for name, nodes in sorted(seen.items()):
        if len(nodes) > 1 and not _same_unnamed_class(nodes):
            scan.add(
                "VF_GRAPH_DUPLICATE_NAME",
                f"node name {name!r} is used by {len(nodes)} nodes; names must be unique in a flow",
                "pass an explicit, unique name= to each affected node",
                ", ".join(sorted(site_of(n) for n in nodes)),
            )


def _same_unnamed_class(nodes: list[Node]) -> bool:
    """True when the clash is the ambiguity already reported: unnamed nodes of one class."""
    return all(n.name is None for n in nodes) and len({type(n) for n in nodes}) == 1


def _topological(reachable: list[Node], scan: _Scan) -> list[Node]:
    """Kahn's algorithm with ties broken by name, so declaration order never matters."""
    pending = {id(n): len(set(map(id, n.parents))) for n in reachable}
    kids: dict[int, list[Node]] = {id(n): [] for n in reachable}
    for node in reachable:
        for parent in {id(p): p for p in node.parents}.values():
            kids[id(parent)].append(node)
    heap = [(scan.names[id(n)], i, n) for i, n in enumerate(reachable) if pending[id(n)] == 0]
    heapq.heapify(heap)
    order: list[Node] = []
    counter = len(reachable)
    while heap:
        _, _, node = heapq.heappop(heap)
        order.append(node)
        for child in kids[id(node)]:
            pending[id(child)] -= 1
            if pending[id(child)] == 0:
                counter += 1
                heapq.heappush(heap, (scan.names[id(child)], counter, child))
    if len(order) < len(reachable):
        stuck = sorted(
            (n for n in reachable if pending[id(n)] > 0), key=lambda n: scan.names[id(n)]
        )
        looped = _in_loops(stuck, kids)
        scan.add(
            "VF_GRAPH_CYCLE",
            f"the graph has a cycle; these nodes wait on each other: "
            f"{', '.join(scan.names[id(n)] for n in looped[:10])}",
            "remove the parent link that closes the loop (a node wired, directly or not, "
            "to its own output); a flow is a DAG",
            ", ".join(site_of(n, wired=True) for n in looped[:3]),
        )
        order.extend(stuck)  # still lowered, so their own problems are reported too
    for node in reachable:
        if len(set(map(id, node.parents))) != len(node.parents):
            scan.add(
                "VF_GRAPH_PARENT_REPEATED",
                f"{safe_repr(node)} lists the same parent twice",
                "pass each parent once",
                site_of(node),
            )
    return order


def _in_loops(stuck: list[Node], kids: dict[int, list[Node]]) -> list[Node]:
    """The stuck nodes that lie on a loop: those merely downstream of one are peeled off."""
    left = {id(n): n for n in stuck}
    peeled = True
    while peeled:
        ends = [key for key in left if not any(id(k) in left for k in kids[key])]
        peeled = bool(ends)
        for key in ends:
            del left[key]
    return [n for n in stuck if id(n) in left]


def _lower_node(node: Node, children: list[str], flow_type: str, scan: _Scan) -> NodeIR:
    name = scan.names[id(node)]
    where = f"{site_of(node)} (node '{name}')"
    parents = tuple(scan.names[id(p)] for p in node.parents)
    fields = _node_fields(node, parents, where, scan)
    join = fields.pop("join_policy")
    if join is None and len(parents) > 1:
        join = JoinPolicy.default_for(flow_type)
    declared = fields.pop("delivery")
    delivery = declared or DeliveryPolicy.default_for(flow_type)
    check_warmup_bound(fields["warmup_seconds"], delivery, where, scan)
    native = component_spec(node)  # a native component: no class, params already checked
    arity = None if native else arity_problem(node, parents=len(parents))
    if arity is not None:
        scan.add("VF_GRAPH_ARITY", arity, "take one argument per parent, in parent order", where)
    return NodeIR(
        name=name,
        kind=node_kind(type(node).kind),
        node_class="" if native else _node_class(node, where, scan),
        params_json=component_params(node) if native else _params_json(node, where, scan),
        component=native,
        parents=parents,
        children=tuple(children),
        join_policy=join,
        delivery=delivery,
        delivery_declared=declared is not None,
        site=where,
        **fields,
    )


def _node_fields(node: Node, parents: tuple[str, ...], where: str, scan: _Scan) -> dict[str, Any]:
    processor = isinstance(node, Processor)
    nb_tasks = getattr(node, "nb_tasks", 1) if processor else 1
    device = getattr(node, "device_type", "cpu") if processor else "cpu"
    gpu_count = getattr(node, "gpu_count", 1) if processor else 1
    memory = getattr(node, "gpu_memory_gib", None) if processor else None
    partition_by = getattr(node, "partition_by", None)
    values: dict[str, Any] = {
        "nb_tasks": nb_tasks,
        "device_type": device,
        "gpu_count": gpu_count,
        "gpu_memory_gib": memory,
        "warmup_seconds": getattr(node, "warmup_seconds", None) if processor else None,
        "is_finite": getattr(node, "is_finite", True),
        "image": node.image,
        "partition_by": partition_by,
        "join_policy": getattr(node, "join_policy", None),
        "delivery": getattr(node, "delivery", None),
        "idempotent": getattr(node, "idempotent", False),
        # read as the worker reads it (MSGID-4): any true value
        "replayable": isinstance(node, Producer) and bool(getattr(node, "replayable", False)),
    }
    _check_fields(values, parents, where, scan)
    if isinstance(node, Consumer) and partition_by is not None:
        scan.add(
            "VF_GRAPH_CONSUMER_PARTITION",
            f"consumer '{node.name or type(node).__name__}' sets partition_by; "
            "consumers never partition",
            "remove partition_by from the consumer; partition the processor before it",
            where,
        )
    return values


def _check_fields(
    values: dict[str, Any], parents: tuple[str, ...], where: str, scan: _Scan
) -> None:
    def bad(code: str, what: str, remedy: str) -> None:
        scan.add(code, what, remedy, where)

    nb_tasks, gpu_count = values["nb_tasks"], values["gpu_count"]
    if not positive_int(nb_tasks) or nb_tasks > MAX_NB_TASKS:
        bad(
            "VF_GRAPH_NB_TASKS",
            f"nb_tasks={safe_repr(nb_tasks)} is not an integer from 1 to {MAX_NB_TASKS}",
            f"pass 1 <= nb_tasks <= {MAX_NB_TASKS} (the most replicas vf.yaml may set)",
        )
    if values["device_type"] not in DEVICE_TYPES:
        bad(
            "VF_GRAPH_DEVICE",
            f"device_type={safe_repr(values['device_type'])} is not one of cpu, gpu",
            "pass device_type=CPU or GPU",
        )
    if not positive_int(gpu_count):
        bad(
            "VF_GRAPH_GPU",
            f"gpu_count={safe_repr(gpu_count)} is not a positive integer",
            "pass gpu_count >= 1",
        )
    check_gpu_memory(values, bad)
    check_warmup(values, bad)
    for key, expected in (
        ("is_finite", bool),
        ("idempotent", bool),
        ("image", str),
        ("partition_by", str),
    ):
        value = values[key]
        if value is not None and not isinstance(value, expected):
            bad(
                "VF_GRAPH_FIELD_TYPE",
                f"{key}={safe_repr(value)} has the wrong type",
                f"pass a {expected.__name__}",
            )
    check_strings(values, bad)
    join, delivery = values["join_policy"], values["delivery"]
    if join is not None and not isinstance(join, JoinPolicy):
        bad(
            "VF_POLICY_JOIN",
            f"join_policy={safe_repr(join)} is not a JoinPolicy",
            "pass JoinPolicy(...)",
        )
        values["join_policy"] = None
    if delivery is not None and not isinstance(delivery, DeliveryPolicy):
        bad(
            "VF_POLICY_DELIVERY",
            f"delivery={safe_repr(delivery)} is not a DeliveryPolicy",
            "pass DeliveryPolicy(...)",
        )
        values["delivery"] = None
    check_join_rules(values, parents, bad)


def check_warmup_bound(
    warmup: int | None, delivery: DeliveryPolicy, where: str, scan: _Scan
) -> None:
    """The worker bounds ``open()`` as any node call (DELIV-12): a warm-up past the bound
    would be called hung before it ends."""
    bound = delivery.call_timeout_seconds
    if warmup is None or not bound or warmup <= bound:
        return
    scan.add(
        "VF_GRAPH_WARMUP",
        f"warmup_seconds={warmup} is longer than the bound of a node call "
        f"(call_timeout_seconds={bound:g}), which open() runs under: the replica would be "
        "called hung while it loads",
        f"pass delivery=DeliveryPolicy(call_timeout_seconds={warmup}) or more, or 0 for no bound",
        where,
    )


def _node_class(node: Node, where: str, scan: _Scan) -> str:
    cls = type(node)
    if cls.__module__ == FALLBACK_MODULE:
        scan.add(
            "VF_GRAPH_NODE_CLASS",
            f"class {cls.__qualname__} lives in a graph module whose file name shadows an "
            "installed module, so a worker cannot import it",
            "rename the graph module, or define node classes in a sibling <name>_nodes.py",
            where,
        )
    elif cls.__module__ == "__main__" or "<locals>" in cls.__qualname__:
        scan.add(
            "VF_GRAPH_NODE_CLASS",
            f"class {cls.__qualname__} cannot be imported by a worker (defined in "
            f"{'__main__' if cls.__module__ == '__main__' else 'a function'})",
            "define node classes at module level in the graph module or a sibling module",
            where,
        )
    return f"{cls.__module__}.{cls.__qualname__}"


def _params_json(node: Node, where: str, scan: _Scan) -> str:
    params = {k: v for k, v in node.get_params().items() if k not in BASE_KEYWORDS}
    for key in params:
        if key.startswith("*"):
            scan.add(
                "VF_GRAPH_PARAMS",
                f"constructor takes *{key[1:]}; workers rebuild nodes from keyword arguments",
                "replace *args with named parameters",
                where,
            )
    problem = json_problem(params, "params")
    if problem:
        scan.add(
            "VF_GRAPH_PARAMS",
            f"constructor argument {problem} is not JSON-serializable",
            "pass only str, int, float, bool, None, lists and str-keyed dicts; "
            "load heavy data in open()",
            where,
        )
        return "{}"
    return compact_json(params, ascii=False)


def _check_flow_id(flow_id: object, scan: _Scan) -> None:
    """An explicit flow id names every stream and object: it must be one already."""
    if flow_id is not None and not (isinstance(flow_id, str) and names.FLOW_ID.match(flow_id)):
        scan.add(
            "VF_GRAPH_FLOW_ID",
            f"flow_id {safe_repr(flow_id)} is not a valid flow id",
            "use 1-63 lowercase letters, digits or '-', starting and ending alnum",
        )
