"""Messages for a worker's own hot subscriptions, handed over straight from the read loop.

nats-py delivers every message through its subscription's queue to a task that
awaits the callback, and parses each header block into a dict field by field,
character checks included. A worker's pull inbox and publish-ack inbox take two or
three messages per item, and their handlers are short and never wait. On a
:class:`DirectClient`, a subscription made with :func:`subscribe_direct` has its
messages built and passed to a plain function as the protocol parser reads them:
no queue, no task switch, and headers split once. Every other subscription
(control subjects, JetStream requests) goes through nats-py as before, and on a
client of another class :func:`subscribe_direct` falls back to a callback.

A handler runs inside the connection's read loop: it must not block, and what it
raises is logged and dropped so that one bad message cannot close the connection.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

log = logging.getLogger("vf.worker")
Handler = Callable[[Msg], None]
_STATUS_LINE = b"NATS/1.0"
# One "Name: Value" line: a name of visible ASCII other than ':', blanks around both.
_FIELD = re.compile(rb"^[ \t]*([!-9;-~]+)[ \t]*:[ \t]*(.*?)[ \t]*\r?$", re.MULTILINE)


class DirectClient(Client):
    """A nats-py client that hands some subscriptions' messages straight to a function."""

    def __init__(self) -> None:
        super().__init__()
        self.direct: dict[int, Handler] = {}

    async def _process_msg(
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None
    ) -> None:
        handler = self.direct.get(sid)
        if handler is None or sid not in self._subs:  # nats-py's, or no longer subscribed
            await super()._process_msg(sid, subject, reply, data, headers)  # type: ignore[arg-type]
            return
        self.stats["in_msgs"] += 1
        self.stats["in_bytes"] += len(data)
        parsed = parse_headers(headers) if headers else None
        msg = Msg(
            _client=self,
            subject=subject.decode(),
            reply=reply.decode(),
            data=data,
            headers=parsed,
            _sid=sid,
        )
        try:
            handler(msg)
        except Exception:
            log.exception("a message on %s could not be handled", msg.subject)


async def subscribe_direct(client: Client, subject: str, handler: Handler) -> Subscription:
    """Subscribe ``handler`` to ``subject``, directly where the client allows it."""
    if not isinstance(client, DirectClient):

        async def callback(msg: Msg) -> None:
            handler(msg)

        return await client.subscribe(subject, cb=callback)
    sub = await client.subscribe(subject)
    client.direct[sub._id] = handler
    return sub


async def unsubscribe_direct(client: Client, sub: Subscription) -> None:
    """End a subscription made with :func:`subscribe_direct`."""
    if isinstance(client, DirectClient):
        client.direct.pop(sub._id, None)
    await sub.unsubscribe()


async def drain_direct(client: Client, sub: Subscription, *, timeout: float) -> None:
    """End a subscription made with :func:`subscribe_direct` once the broker has gone
    quiet on it, handing its handler every message that was already on its way.

    A plain unsubscribe drops those: for a JetStream pull inbox, messages the broker
    counts as delivered and that stay leased until their ack wait. The broker hands a
    pull consumer's messages to the connection from another goroutine than the one that
    answers a ping, so one round trip is no proof that none is left: the subscription
    ends after a round trip in which the client received nothing. Past ``timeout`` (the
    broker is away, or never quiet) it ends as a plain unsubscribe does.
    """
    raw: Any = client
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        await raw._send_unsubscribe(sub._id)
        while True:
            seen = client.stats["in_msgs"]
            await asyncio.wait_for(client.flush(), max(deadline - loop.time(), 0.001))
            if client.stats["in_msgs"] == seen:
                break
    except Exception as exc:  # closed, reconnecting or unanswered: nothing more will come
        log.debug("ending a subscription before the broker went quiet: %s", exc)
    finally:
        if isinstance(client, DirectClient):
            client.direct.pop(sub._id, None)
        client._remove_sub(sub._id)


def parse_headers(block: bytes) -> dict[str, str] | None:
    """A message's header block as a dict, the way nats-py reads one.

    An inline status (``NATS/1.0 408 Request Timeout``) becomes ``Status`` and
    ``Description``; each ``Name: Value`` line one entry, values trimmed and decoded
    as UTF-8 with replacement. Lines without a colon, and names that are empty, hold
    whitespace or are not ASCII, are skipped. None for a block with no entries, or
    one that is not a header block.
    """
    end = block.find(b"\r\n")
    first = block if end < 0 else block[:end]
    if not first.startswith(_STATUS_LINE):
        return None
    found: dict[str, str] = {}
    status, _, description = first[len(_STATUS_LINE) :].strip().partition(b" ")
    if status.isdigit():
        found["Status"] = status.decode()
    if description.strip():
        found["Description"] = description.strip().decode("utf-8", "replace")
    if end >= 0:
        for name, value in _FIELD.findall(block, end + 2):
            found[name.decode()] = value.decode("utf-8", "replace")
    return found or None
