"""Render what a native component changes in its worker container: command and ports."""

from __future__ import annotations

from typing import Any

from vf.ir.plan import Workload


def apply_component(container: dict[str, Any], workload: Workload) -> None:
    """Give a component's container its own command (or the image's entrypoint) and ports."""
    run = workload.component
    if run is None:
        return
    if run.command:
        container["command"] = list(run.command)
    else:
        del container["command"]
    if run.ports:
        extra = [
            {"name": p.name, "containerPort": p.port, "protocol": p.protocol} for p in run.ports
        ]
        container["ports"] = [*container.get("ports", []), *extra]
