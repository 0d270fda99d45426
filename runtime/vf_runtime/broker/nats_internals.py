"""The nats-py internals a worker writes through: the one module that names them.

nats-py has no public call for two things a worker does on its hot path and at its stop:
queueing protocol lines it wrote itself on the client's outgoing buffer (a batch of acks
or outputs as one write, ``vf_runtime.broker.protocol``), and telling the broker to stop
sending to a subscription while still taking what is already on its way
(``vf_runtime.broker.pull``). Both go through private members of nats-py's ``Client`` and
``Subscription``, and only through the functions here.

At import, :func:`missing` checks that each member exists and accepts the call vf makes;
:data:`AVAILABLE` is False when one does not (a nats-py release renamed or changed it),
and the callers then take nats-py's public path (``Client.publish``,
``Subscription.drain``): the same on the wire, and slower (ADR 223 measured a
processing hop at 1.125 times the CPU, ``bench/runtime_compare.py``). The versions of
nats-py vf is tested with are declared in ``pyproject.toml``;
``tests/runtime/broker/test_nats_internals.py`` runs both paths.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from nats.aio.client import Client
from nats.aio.subscription import Subscription

# Each coroutine method, with the arguments vf passes it (besides the instance).
_CALLS: dict[str, tuple[Any, ...]] = {
    "_send_command": (b"",),  # queue bytes on the outgoing buffer
    "_flush_pending": (),  # wake the flusher task
    "_send_unsubscribe": (0,),  # UNSUB, keeping the subscription's local state
}
# Attributes of a client and a subscription (instances, as nats-py builds them).
_CLIENT_FIELDS = ("_flush_queue", "stats")
_SUBSCRIPTION_FIELDS = ("_id",)


def missing(
    client_type: type[Any] = Client,
    subscription_type: Callable[..., Any] = Subscription,
) -> list[str]:
    """The members vf needs that ``client_type`` or its subscriptions lack, or that do not
    accept vf's call; empty when every one is there."""
    absent: list[str] = []
    for name, args in _CALLS.items():
        method = getattr(client_type, name, None)
        if not inspect.iscoroutinefunction(method):
            absent.append(f"Client.{name}")
            continue
        try:
            inspect.signature(method).bind(None, *args)
        except TypeError:
            absent.append(f"Client.{name}")
    try:
        client = client_type()
        subscription = subscription_type(client, 0)
    except Exception:
        return [*absent, "Client()", "Subscription(client, id)"]
    absent += [f"Client.{n}" for n in _CLIENT_FIELDS if not hasattr(client, n)]
    absent += [f"Subscription.{n}" for n in _SUBSCRIPTION_FIELDS if not hasattr(subscription, n)]
    return absent


MISSING = missing()
AVAILABLE = not MISSING


async def queue(client: Client, data: bytes, *, messages: int, size: int) -> None:
    """Queue ``data`` (``messages`` whole protocol lines carrying ``size`` payload bytes)
    on the outgoing buffer, counted and flushed as ``Client.publish`` counts and flushes."""
    raw: Any = client
    await raw._send_command(data)
    client.stats["out_msgs"] += messages
    client.stats["out_bytes"] += size
    if raw._flush_queue is not None and raw._flush_queue.empty():
        await raw._flush_pending()


async def stop_interest(client: Client, subscription: Subscription) -> None:
    """Tell the broker to send no more to ``subscription``; what is already on its way is
    still delivered to it, until ``Subscription.drain`` or ``unsubscribe`` ends it."""
    raw: Any = client
    await raw._send_unsubscribe(getattr(subscription, "_id"))  # noqa: B009 - a private name
