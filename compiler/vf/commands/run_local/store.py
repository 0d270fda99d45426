"""The payload store of a local run: the plan's, as in its cluster (none means none)."""

from __future__ import annotations

from vf.ir.plan import Plan


def needs_payload_store(plan: Plan) -> bool:
    """Any edge may carry a payload over the inline limit; idempotent sinks keep records."""
    return any(
        dict(w.env).get("VF_HAS_CHILDREN") == "1" or dict(w.env).get("VF_IDEMPOTENT") == "1"
        for w in plan.workloads
    )


def has_payload_store(plan: Plan) -> bool:
    """Whether the plan's workers get a store: any ``payload_store.profile`` but ``none``
    (an external one's stand-in here is an embedded Redis)."""
    return plan.infra.store_profile != "none"


def starts_store(plan: Plan, redis_url: str | None) -> bool:
    """Whether the run starts a store of its own: the plan has one, a worker would use it,
    and ``--redis`` names none."""
    return redis_url is None and has_payload_store(plan) and needs_payload_store(plan)


def store_note(plan: Plan, *, redis_url: str | None) -> str | None:
    """The line a run of a plan without a payload store prints (none runs here either, or
    --redis's is used); None when the plan has one or no worker would use one."""
    if has_payload_store(plan) or not needs_payload_store(plan):
        return None
    where = f"environment {plan.environment} has payload_store.profile none in vf.yaml"
    if redis_url is not None:
        return (
            f"[vf] payload store: the one --redis names, though {where}: in its cluster an "
            "item above the inline limit fails (VF_BLOB_NO_STORE)\n"
        )
    return (
        f"[vf] no payload store: {where}; as in its cluster, an item above the inline limit "
        "fails (VF_BLOB_NO_STORE)\n"
    )
