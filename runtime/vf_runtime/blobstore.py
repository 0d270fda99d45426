"""Large payloads in Redis, and the record an idempotent consumer keeps of what it applied.

A blob is written before the envelope that points at it, with a TTL as the
backstop. Its *obligations* name the readers (durables) that still have to ack
the envelope; each reader removes its own name after a successful ack and the
last one deletes the blob. Removing a name twice is a no-op, so a redelivered
message can never release a blob another reader still needs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from redis.asyncio import Redis

BLOB_PREFIX = "vf-blob-"
IDEM_PREFIX = "vf-idem-"
IDEM_TTL = 24 * 3600


def _obligations_key(ref: str) -> str:
    # The braces hash-tag both keys onto one Redis Cluster slot so MULTI covers them.
    return f"vf-blobobl-{{{ref}}}"


class PayloadMissing(Exception):
    """The envelope points at a blob that is gone (expired or never written)."""


class BlobStore:
    """Offloaded payloads keyed by message id, released by named readers."""

    def __init__(self, client: Redis, *, ttl_seconds: int) -> None:
        self.client = client
        self.ttl = ttl_seconds

    @classmethod
    def from_url(cls, url: str, *, ttl_seconds: int) -> BlobStore:
        return cls(
            Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5),
            ttl_seconds=ttl_seconds,
        )

    async def put(self, message_id: str, data: bytes, *, readers: Iterable[str]) -> str:
        """Store ``data`` for ``readers``; the same message id always maps to the same key."""
        ref = f"{BLOB_PREFIX}{message_id}"
        names = sorted(set(readers))
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.set(ref, data, ex=self.ttl)
            if names:
                pipe.sadd(_obligations_key(ref), *names)
                pipe.expire(_obligations_key(ref), self.ttl)
            await pipe.execute()
        return ref

    async def get(self, ref: str) -> bytes:
        data = await self.client.get(ref)
        if data is None:
            raise PayloadMissing(f"payload {ref} is not in the store (expired or never written)")
        return data if isinstance(data, bytes) else data.encode()

    async def release(self, ref: str, *, reader: str) -> bool:
        """Drop ``reader``'s obligation; delete the blob when none is left. True if deleted."""
        key = _obligations_key(ref)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.srem(key, reader)
            pipe.scard(key)
            removed, left = await pipe.execute()
        if removed and left == 0:
            await self.client.delete(ref, key)
            return True
        return False

    async def close(self) -> None:
        await self.client.aclose()


def idempotency_key(*, flow_id: str, node: str, message_id: str) -> str:
    digest = hashlib.sha256(f"{flow_id}:{node}:{message_id}".encode()).hexdigest()
    return f"{IDEM_PREFIX}{digest}"


class AppliedLog:
    """What an idempotent consumer has applied, so a redelivery is acked, not re-applied."""

    def __init__(self, client: Redis, *, flow_id: str, node: str) -> None:
        self.client = client
        self.flow_id = flow_id
        self.node = node

    def key(self, message_id: str) -> str:
        return idempotency_key(flow_id=self.flow_id, node=self.node, message_id=message_id)

    async def seen(self, message_id: str) -> bool:
        return bool(await self.client.exists(self.key(message_id)))

    async def mark(self, message_id: str) -> None:
        await self.client.set(self.key(message_id), b"1", ex=IDEM_TTL)
