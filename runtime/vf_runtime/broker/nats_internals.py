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

A third: every message a worker receives has its header block read by nats-py's
``Client._parse_header_lines``, which tests each character of each header name for
whitespace in a generator, about 0.2 µs a character on the hot path (a ``traceparent``
adds 1.8 µs a message, ADR 250). :func:`client` makes vf's connections of a ``Client``
subclass whose header parse gives the same result with one ``str.split`` a name, where
the import-time check finds nats-py's method there and agreeing with vf's on every case
of :data:`HEADER_CASES`; otherwise a plain ``Client``. And a fourth: whether the server
asked for TLS, which ``connect`` checks for a client given a CA (:func:`requires_tls`,
failing closed where nats-py keeps no server INFO).
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

# Header blocks (after ``NATS/1.0\r\n``) whose parse vf's and nats-py's must agree on.
HEADER_CASES: tuple[bytes, ...] = (
    b"",
    b"\r\n\r\n",
    b"Nats-Msg-Id: f:r:g1:n:0:12\r\nVF-Env: 4\r\n\r\n",
    b"traceparent: 00-" + b"ab" * 16 + b"-" + b"cd" * 8 + b"-01\r\ntracestate: a=b\r\n\r\n",
    b"a b: spaced name\r\n",
    b"k\x1c: a separator in the name\r\n",
    b"k\x85: a byte past ASCII\r\n",
    b"\xff: not ASCII\r\n",
    b"k: \xff not UTF-8\r\n",
    b"x:\tv\r\n",
    b"  padded  :  value  \r\n",
    b": no name\r\n",
    b"no colon\r\n",
    b"a:b:c\r\n",
    b"dup: 1\r\ndup: 2\r\n",
)


def parse_headers(raw: bytes) -> dict[str, str]:
    """A message's header lines as ``Client._parse_header_lines`` reads them: ``Name:
    Value`` split at the first colon, both stripped, a name not ASCII or holding
    whitespace skipped, the value decoded as UTF-8 with replacement; the last of a
    repeated name wins."""
    out: dict[str, str] = {}
    for line in raw.split(b"\r\n"):
        name, colon, value = line.partition(b":")
        if not colon:
            continue
        try:
            key = name.strip().decode("ascii")
        except UnicodeDecodeError:
            continue
        if key and key.split() != [key]:  # whitespace inside (str.isspace's, as nats-py)
            continue
        out[key] = value.strip().decode("utf-8", "replace")
    return out


def agrees(original: Callable[[bytes], Any]) -> bool:
    """Whether ``original`` parses every case of :data:`HEADER_CASES` as vf does."""
    try:
        return all(original(case) == parse_headers(case) for case in HEADER_CASES)
    except Exception:
        return False


class _FastHeaders(Client):
    """nats-py's client with vf's header parse (the same result, faster)."""

    _parse_header_lines = staticmethod(parse_headers)


_ORIGINAL = getattr(Client, "_parse_header_lines", None)
FAST_HEADERS = callable(_ORIGINAL) and agrees(_ORIGINAL)


def client() -> Client:
    """A new, unconnected client for vf's connections: with vf's header parse where
    nats-py's agrees with it (:data:`FAST_HEADERS`), else nats-py's own."""
    return _FastHeaders() if FAST_HEADERS else Client()


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


def requires_tls(client: Client) -> bool:
    """Whether the server ``client`` connected to asked for TLS (``tls_required`` in the
    INFO nats-py keeps); False where nats-py keeps no such INFO, so that a client given a
    CA refuses the connection rather than trust one it cannot check."""
    info = getattr(client, "_server_info", None)
    return isinstance(info, dict) and bool(info.get("tls_required"))
