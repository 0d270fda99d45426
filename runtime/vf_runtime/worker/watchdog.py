"""The bound on one node call (DELIV-12): a replica whose node never returns says so.

A node call that never returns (a deadlock, a wedged device, a network read without a
timeout) leaves the event loop free: without a bound the replica would keep renewing
the leases of everything it fetched ahead, for ever, while a healthy sibling idles.
The watchdog looks at the node thread a few times a second. While a call runs within
its bound the worker is waiting on its node, not stuck, and it beats. Once a bounded
call (``process``, ``consume``, ``next``) has run past ``VF_CALL_TIMEOUT_SECONDS``,
the replica is hung: it is reported, liveness fails, and the worker gives the call up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from vf_runtime.worker.health import Metrics
from vf_runtime.worker.nodethread import NodeThread

PERIOD = 1.0  # the longest wait between two looks


class NodeHung(Exception):
    """A node call ran past its bound; its inputs fail as any failed call's do (DELIV-4)."""

    code = "VF_NODE_HUNG"

    def render(self) -> str:
        return (
            f"error[{self.code}] {self}; its unstarted inputs are handed back and the replica "
            "exits\n  = fix: find where the node blocks (a lock, a device, a read without a "
            "timeout); DeliveryPolicy(call_timeout_seconds=...) sets the bound, 0 removes it"
        )


async def watch(
    thread: NodeThread,
    *,
    bound: float,
    metrics: Metrics,
    hung: Callable[[float], None],
) -> None:
    """Beat while the node works within ``bound``; call ``hung(seconds)`` once, and
    return, when a bounded call has run longer (``bound`` 0: no bound)."""
    period = min(PERIOD, bound / 4) if bound > 0 else PERIOD
    while True:
        await asyncio.sleep(period)
        elapsed, bounded = thread.running_for()
        if bounded and bound > 0 and elapsed > bound:
            hung(elapsed)
            return
        if elapsed:
            metrics.beat()  # waiting on its node, which is within its bound: alive
