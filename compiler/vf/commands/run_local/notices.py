"""What vf run-local tells its user about the difference between its processes and pods."""

from __future__ import annotations

from vf.ir.plan import Plan


def not_applied(plan: Plan) -> str:
    """What a pod has that a local process does not, said once at the start."""
    limited = sorted({m for w in plan.workloads if (m := w.resources.memory_limit) is not None})
    limits = f"memory limits ({', '.join(limited)}), " if limited else ""
    return (
        f"[vf] local processes: {limits}the read-only root and the pods' security contexts "
        "are not applied; vf run-tree --runtime podman applies them\n"
    )
