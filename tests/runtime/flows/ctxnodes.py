"""Nodes that ask for their runtime context (``ctx`` / ``context``) and route with it."""

from __future__ import annotations

from typing import Any

from vf import Processor
from vf_runtime.context import RuntimeContext


class Parity(Processor):
    """Routes each item by the parity of ``i`` and says where it ran."""

    def process(self, item: dict[str, Any], ctx: RuntimeContext) -> dict[str, Any]:
        ctx.set_partition_key(item["i"] % 2)
        return {"i": item["i"], "by": [ctx.flow_id, ctx.node_name, ctx.replica_id]}


class Where(Processor):
    """Adds the replica that handled the item (the context taken keyword-only)."""

    def process(self, item: dict[str, Any], *, context: RuntimeContext) -> dict[str, Any]:
        return {**item, "replica": context.replica_id, "run": context.run_id}
