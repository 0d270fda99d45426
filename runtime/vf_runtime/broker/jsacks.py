"""JetStream publishes whose acks return on one inbox of this worker, matched by a counter.

nats-py's own asynchronous publish draws random bytes for every reply subject and
builds a dataclass from every ack; a worker publishes thousands of messages a
second and needs one fact from each ack (was it a duplicate?), so it keeps its
own table: about half the client's CPU per output of ``JetStreamContext.publish_async``
(ADR 223, ``bench/publish_calls.py``). Every future settles: with the ack, with the
broker's refusal, or by :meth:`AckInbox.expire` (the caller's timeout, a reconnection);
``publish_async`` leaves the future of a publish that raised unsettled, its slot taken.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.errors import APIError, NoStreamResponseError

from vf_runtime.broker.protocol import hpub

# A plain ack reads {"stream":…,"seq":…}; one that is a duplicate or an error says so
# with a quoted "duplicate" or "error" key. Whatever holds either word is parsed in full.
_PLAIN_ACK = b'{"stream":'


class AckInbox:
    """Publishes to JetStream; each returned future settles with ``duplicate`` (a bool)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.prefix = client.new_inbox() + "."
        self.count = 0
        self.waiting: dict[str, asyncio.Future[bool]] = {}
        self.sub: Subscription | None = None

    async def start(self) -> None:
        self.sub = await self.client.subscribe(self.prefix + "*", cb=self._on_reply)

    async def publish(
        self, subject: str, data: bytes, *, headers: Mapping[str, str]
    ) -> tuple[str, asyncio.Future[bool]]:
        """Send one message; return its token and the future of its ack."""
        self.count += 1
        token = str(self.count)
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.waiting[token] = future
        await hpub(self.client, subject, data, reply=self.prefix + token, headers=headers)
        return token, future

    def expire(self, token: str, error: BaseException) -> None:
        """Give up on an ack (it timed out, or the connection it would come on is gone)."""
        future = self.waiting.pop(token, None)
        if future is not None and not future.done():
            future.set_exception(error)

    async def stop(self) -> None:
        if self.sub is not None:
            sub, self.sub = self.sub, None
            await sub.unsubscribe()

    async def _on_reply(self, msg: Msg) -> None:
        future = self.waiting.pop(msg.subject[len(self.prefix) :], None)
        if future is None or future.done():
            return
        if msg.headers and msg.headers.get("Status") == "503":
            future.set_exception(NoStreamResponseError())  # no stream took the subject
            return
        data = msg.data
        if data.startswith(_PLAIN_ACK) and b'"error"' not in data and b'"duplicate"' not in data:
            future.set_result(False)  # the common ack: stored, not a duplicate
            return
        try:
            reply = json.loads(data)
        except ValueError as exc:
            future.set_exception(APIError(description=f"unreadable publish ack: {exc}"))
            return
        error = reply.get("error")
        if error:
            future.set_exception(_api_error(error))
        else:
            future.set_result(bool(reply.get("duplicate", False)))


def _api_error(error: dict[str, object]) -> APIError:
    """The typed nats-py error for an error object of the JetStream API."""
    try:
        APIError.from_error(error)
    except APIError as exc:
        return exc
    return APIError(description=str(error))
