"""Plan the parts of a workload that a native component's descriptor decides."""

from __future__ import annotations

from vf.config.targets import Environment
from vf.ir.graph import NodeIR
from vf.ir.plan import ComponentRun, ContainerResources


def component_run(node: NodeIR) -> ComponentRun | None:
    """What the component's container runs; None for a node written as a Python class."""
    spec = node.component
    if spec is None:
        return None
    return ComponentRun(ref=spec.ref, command=spec.command, ports=spec.ports)


def component_resources(
    env: Environment, *, node: NodeIR, merged: ContainerResources
) -> ContainerResources:
    """Requests for a component: the node's own vf.yaml entry, else the descriptor's, else
    the environment's ``*`` entry (already in ``merged``)."""
    spec = node.component
    if spec is None:
        return merged
    own = dict(env.resources).get(node.name)

    def pick(field: str, declared: str | None) -> str | None:
        mine = getattr(own, field, None) if own is not None else None
        if isinstance(mine, str):
            return mine
        fallback: str | None = getattr(merged, field)
        return declared or fallback

    return ContainerResources(
        cpu=pick("cpu", spec.cpu),
        memory=pick("memory", spec.memory),
        cpu_limit=merged.cpu_limit,
        memory_limit=merged.memory_limit,
    )
