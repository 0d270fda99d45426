"""A continuous pull on one durable: requests stay outstanding for what the replica has room for.

Instead of one fetch round trip per batch, the feed keeps pull requests open on
the broker (``$JS.API.CONSUMER.MSG.NEXT``) for as many messages as its owner has
room for, and the broker pushes each message into one inbox as soon as it is
stored. A request lives ``EXPIRES`` seconds; the broker answers its end with a
status (408, 409) that says how much of it went unused, and sends heartbeats
while it waits. When neither messages nor heartbeats arrive (the broker
restarted, the connection moved), the requests are presumed lost and re-issued.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from vf_runtime.broker import nats_internals

log = logging.getLogger("vf.worker")
EXPIRES = 5.0
HEARTBEAT = 1.0
LOST_AFTER = 3 * HEARTBEAT
PAUSE = 0.25
DRAIN_TIMEOUT = 2.0  # how long a stopping feed waits for the broker's last messages
_STATUS, _DESCRIPTION, _UNUSED = "Status", "Description", "Nats-Pending-Messages"


class PullFeed:
    """Pull requests on one durable, delivering each message to ``deliver``."""

    def __init__(
        self,
        client: Client,
        *,
        stream: str,
        durable: str,
        deliver: Callable[[Msg], None],
        changed: Callable[[], None],
    ) -> None:
        self.client = client
        self.subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self.durable = durable
        self.deliver = deliver
        self.changed = changed  # a request ended: there may be room to ask again
        self.requested = 0  # asked for and neither delivered nor given back
        self.heard = time.monotonic()
        self.paused_until = 0.0
        self.inbox = client.new_inbox()
        self.sub: Subscription | None = None
        self.body = ""

    async def start(self) -> None:
        self.sub = await self.client.subscribe(self.inbox, cb=self._on_message)
        expires = int(EXPIRES * 1e9)
        self.body = json.dumps({"expires": expires, "idle_heartbeat": int(HEARTBEAT * 1e9)})[1:]

    async def request(self, count: int) -> None:
        """Ask the broker for ``count`` more messages."""
        if self.requested == 0:
            self.heard = time.monotonic()  # the silence to watch starts now
        self.requested += count
        payload = f'{{"batch":{count},{self.body}'.encode()
        await self.client.publish(self.subject, payload, reply=self.inbox)

    def ready(self) -> bool:
        """False for a moment after the broker refused a request (JetStream still starting)."""
        return time.monotonic() >= self.paused_until

    def wait_hint(self) -> float:
        """How long the owner may wait before calling :meth:`check` or asking again."""
        paused = self.paused_until - time.monotonic()
        return max(0.05, paused) if paused > 0 else HEARTBEAT

    def check(self) -> None:
        """Forget requests the broker has gone silent on, so they are asked for again."""
        if self.requested and time.monotonic() - self.heard > LOST_AFTER:
            log.info("pull requests on %s went unanswered; asking again", self.durable)
            self.requested = 0
            self.heard = time.monotonic()

    async def stop(self) -> None:
        """End the inbox once the broker has sent what it was sending: every message it
        counts as delivered reaches ``deliver``, so its owner can hand it back."""
        if self.sub is not None:
            sub, self.sub = self.sub, None
            await drain_quietly(self.client, sub, timeout=DRAIN_TIMEOUT)

    async def _on_message(self, msg: Msg) -> None:
        self.heard = time.monotonic()
        headers = msg.headers
        status = headers.get(_STATUS) if headers else None
        if not status:
            self.requested = max(0, self.requested - 1)
            self.deliver(msg)
        elif status != "100":  # 100 is a heartbeat; anything else ended a request
            self._ended(status, headers or {})
            self.changed()

    def _ended(self, status: str, headers: dict[str, str]) -> None:
        unused = headers.get(_UNUSED)
        if unused is not None and unused.isdigit():
            self.requested = max(0, self.requested - int(unused))
        else:
            self.requested = 0
        if status not in ("408", "404"):
            self.paused_until = time.monotonic() + PAUSE
            log.info(
                "pull request on %s ended: %s %s", self.durable, status, headers.get(_DESCRIPTION)
            )


async def drain_quietly(client: Client, sub: Subscription, *, timeout: float) -> None:
    """End ``sub`` once the broker has gone quiet on it, its callback given every message
    that was already on its way (DELIV-10).

    A plain unsubscribe drops those: for a JetStream pull inbox, messages the broker
    counts as delivered and that stay leased until their ack wait. The broker hands a
    pull consumer's messages to the connection from another goroutine than the one that
    answers a ping, so one round trip (all ``Subscription.drain`` waits for) is no proof
    that none is left: the broker is told to stop first, and the subscription drains after
    a round trip in which the client received nothing. Past ``timeout`` (the broker is
    away, or never quiet), or where nats-py lacks the call that stops the broker without
    ending the subscription, it drains at once.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        if nats_internals.AVAILABLE:
            await nats_internals.stop_interest(client, sub)
            while True:
                seen = client.stats["in_msgs"]
                await asyncio.wait_for(client.flush(), max(deadline - loop.time(), 0.001))
                if client.stats["in_msgs"] == seen:
                    break
        ending = sub.drain()  # type: ignore[no-untyped-call]  # nats-py leaves it unannotated
        await asyncio.wait_for(ending, max(deadline - loop.time(), 0.001))
    except Exception as exc:  # closed, reconnecting or unanswered: nothing more will come
        log.debug("ending a subscription before the broker went quiet: %s", exc)
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
