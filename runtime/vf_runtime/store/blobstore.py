"""Large payloads in Redis, and the record an idempotent consumer keeps of what it applied.

A blob is written before the envelope that points at it, with a TTL as the
backstop. Its *obligations* name the readers (durables) that still have to ack
the envelope; each reader removes its own name after a successful ack and the
last one deletes the blob. Removing a name twice is a no-op, so a redelivered
message can never release a blob another reader still needs.

A store that cannot be reached raises :class:`StoreUnavailable` (typed, transient);
:func:`patiently` retries such an operation with backoff until it succeeds or the
worker stops, so an outage delays messages but never spends their delivery budget.

A store that answers but refuses to take more (``OOM command not allowed`` past its
``maxmemory`` under ``noeviction``; ``MISCONF`` when it cannot write its append-only file,
a full volume) raises :class:`StoreFull`: back-pressure, retried the same way, but only
for a bounded time (``full_patience``); past it the error is raised with its name
(``VF_BLOB_STORE_FULL``) for the worker to stop on, never as a failure of the node.

A store that refuses the client itself (a wrong user or password: ``WRONGPASS``,
``NOAUTH``; a command its ACL user may not run: ``NOPERM``) raises :class:`StoreRefused`
(``VF_STORE_AUTH``): never retried, never a failure of a message; the worker stops by that
name. A TLS connection that fails (a certificate the client's CA did not sign, or one for
another name; a store that does not speak TLS to a client with a ``rediss://`` URL) raises
:class:`StoreTlsFailed` (``VF_STORE_TLS``), a refusal too: redis-py calls it a
``ConnectionError``, and retrying it as an outage would wait forever. Reading a key outside
the flow's own (a ``BlobRef`` naming another flow's key) stays
one message's problem (``VF_BLOB_UNREADABLE``).

Every key a flow writes starts with ``store_key_prefix(flow)`` (``vf:<flow>:``), so an ACL
user confined to those keys (``store_acl_rule``) is all a flow's workers need. A reader
reads and releases whatever key a ``BlobRef`` names.

The Redis client (and redis-py with it, about 5 MiB) is made on the first operation: a
worker that never offloads or fetches a payload never loads it.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar
from urllib.parse import urlsplit

from vf_runtime.clientauth import StoreAuth
from vf_runtime.credentials import (
    STORE_PASSWORD_ENV,
    STORE_TLS_CA_ENV,
    STORE_USER_ENV,
    store_key_prefix,
)

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

BLOB_PREFIX = "blob-"  # after the flow's key prefix: vf:<flow>:blob-<message id>
OBLIGATIONS_PREFIX = "blobobl-"
IDEM_PREFIX = "idem-"
LEGACY_BLOB_PREFIX = "vf-blob-"  # keys vf wrote before the flow's prefix (still released)
IDEM_TTL = 24 * 3600
RETRY_DELAYS = (0.05, 0.1, 0.2, 0.5, 1.0)
SCHEMES = ("redis", "rediss", "unix")
log = logging.getLogger("vf.store")
P = ParamSpec("P")
T = TypeVar("T")


class StoreUnavailable(Exception):
    """The payload store could not be reached; retrying later may succeed."""

    code = "VF_STORE_UNAVAILABLE"
    disposition = "transient"


class StoreFull(Exception):
    """The payload store refuses writes: its memory limit or its disk is reached."""

    code = "VF_BLOB_STORE_FULL"
    disposition = "transient"


class StoreRefused(Exception):
    """The payload store refused this client: its user or password (``WRONGPASS``,
    ``NOAUTH``), or a command its ACL user may not run (``NOPERM``)."""

    code = "VF_STORE_AUTH"
    disposition = "fatal"

    def render(self) -> str:
        return (
            f"error[{self.code}] the payload store refused this client: {self}; what the "
            "replica held was handed back, not failed or dead-lettered\n"
            f"  = fix: set {STORE_USER_ENV} and {STORE_PASSWORD_ENV} to a user the store "
            "knows (from the Secret its ACL reads), allowed the keys and commands of "
            "store_acl_rule (docs/security.md)"
        )


class StoreTlsFailed(StoreRefused):
    """The TLS connection to the payload store failed (ADR 0226): never retried."""

    code = "VF_STORE_TLS"

    def render(self) -> str:
        return (
            f"error[{self.code}] the TLS connection to the payload store failed: {self}; what "
            "the replica held was handed back, not failed or dead-lettered\n"
            f"  = fix: point {STORE_TLS_CA_ENV} at the ca.crt of the store's TLS Secret, reach "
            "the store by a name its certificate carries (the Service's), and give the store "
            "and its clients the same tls: in vf.yaml (docs/security.md)"
        )


# A handshake cut short says nothing of the certificates: the server may be restarting.
_CUT_SHORT = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)
PLAINTEXT_PROBE_TIMEOUT = 2.0


def tls_failure(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error under a client error (redis-py chains it as the cause of its
    ``ConnectionError``), unless it only says the handshake was cut short."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLError):
            return None if isinstance(seen, _CUT_SHORT) else seen
        seen = seen.__cause__ or seen.__context__
    return None


async def speaks_plaintext(host: str, port: int) -> bool:
    """Whether the server at ``host:port`` answers a plaintext ``PING`` in RESP (``+PONG``,
    or ``-NOAUTH``/``-ERR`` from a store that wants a login): a server that speaks TLS
    answers no such line."""
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port), PLAINTEXT_PROBE_TIMEOUT
        )
    except (TimeoutError, OSError):
        return False
    try:
        writer.write(b"PING\r\n")
        await writer.drain()
        answer = await asyncio.wait_for(reader.readline(), PLAINTEXT_PROBE_TIMEOUT)
    except (TimeoutError, OSError):
        return False
    finally:
        writer.close()
    return answer[:1] in (b"+", b"-") and answer.endswith(b"\r\n")


async def _plaintext_store(owner: object, exc: BaseException) -> str:
    """For a TLS client whose connection timed out: the address, when the store there
    answers in plaintext (it never began the handshake); else empty."""
    from redis import exceptions as redis_errors
    from redis.asyncio.connection import SSLConnection

    client = getattr(owner, "_client", None) or getattr(owner, "client", None)
    pool = getattr(client, "connection_pool", None)
    if not isinstance(exc, redis_errors.TimeoutError) or pool is None:
        return ""
    if not issubclass(pool.connection_class, SSLConnection):
        return ""
    host = str(pool.connection_kwargs.get("host", "localhost"))
    port = int(pool.connection_kwargs.get("port", 6379))
    return f"{host}:{port}" if await speaks_plaintext(host, port) else ""


def refused(exc: BaseException) -> bool:
    """Whether the store refused the client itself, not the key it asked for."""
    from redis import exceptions as redis_errors

    return isinstance(exc, redis_errors.AuthenticationError | redis_errors.NoPermissionError)


FULL_PATIENCE = 600.0  # seconds a write waits for a full store to take it (VF_STORE_FULL_SECONDS)


class Stopped(Exception):
    """The worker is stopping while an operation waited for the store."""


@functools.cache
def _transient() -> tuple[type[BaseException], ...]:
    """The client's connection-level errors (redis-py is loaded once a client exists)."""
    from redis import exceptions as redis_errors

    return (
        redis_errors.ConnectionError,  # refused, reset, still loading its data
        redis_errors.TimeoutError,
        redis_errors.ReadOnlyError,  # a replica during fail-over
        redis_errors.TryAgainError,
        redis_errors.ClusterDownError,
        OSError,
    )


def _full(exc: BaseException) -> bool:
    """Whether the store refused a write for want of room: over ``maxmemory`` with nothing
    it may evict (``OOM …``), or unable to write its append-only file (``MISCONF …``)."""
    from redis import exceptions as redis_errors

    if isinstance(exc, redis_errors.OutOfMemoryError):
        return True
    text = str(exc)
    return isinstance(exc, redis_errors.ResponseError) and text.startswith(("OOM ", "MISCONF "))


def _typed(method: Callable[P, Awaitable[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Translate the client's connection-level errors into :class:`StoreUnavailable`, and a
    store out of room into :class:`StoreFull`."""

    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await method(*args, **kwargs)
        except StoreRefused:
            raise
        except Exception as exc:
            failure = tls_failure(exc)  # before transient: redis-py's is a ConnectionError
            if failure is not None:
                raise StoreTlsFailed(f"{type(failure).__name__}: {failure}") from exc
            if refused(exc):  # before transient: redis-py's refusal is a ConnectionError
                raise StoreRefused(f"{type(exc).__name__}: {exc}") from exc
            if isinstance(exc, _transient()):
                plain = await _plaintext_store(args[0] if args else None, exc)
                if plain:
                    raise StoreTlsFailed(
                        f"the store at {plain} does not speak TLS (it answered a plaintext "
                        "PING), and this client trusts a CA for it: it will not send its "
                        "credentials in the clear"
                    ) from exc
                raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from exc
            if _full(exc):
                raise StoreFull(f"{type(exc).__name__}: {exc}") from exc
            raise

    return wrapper


async def patiently(
    operation: Callable[[], Awaitable[T]],
    *,
    what: str,
    stopping: Callable[[], bool],
    on_retry: Callable[[], None] = lambda: None,
    full_patience: float = FULL_PATIENCE,
) -> T:
    """Run ``operation`` until the store answers; raise :class:`Stopped` if the worker stops.

    A full store is waited out for ``full_patience`` seconds, counted from this operation's
    first refusal; then :class:`StoreFull` is raised.
    """
    attempt = 0
    full_since: float | None = None
    while True:
        try:
            result = await operation()
        except (StoreUnavailable, StoreFull) as exc:
            if stopping():
                state = "full" if isinstance(exc, StoreFull) else "unavailable"
                raise Stopped(f"stopped while the payload store was {state} ({what})") from exc
            if isinstance(exc, StoreFull):
                now = time.monotonic()
                full_since = now if full_since is None else full_since
                if now - full_since >= full_patience:
                    raise StoreFull(
                        f"the payload store stayed full for {now - full_since:.0f}s during "
                        f"{what} ({exc})"
                    ) from exc
            on_retry()
            if attempt == 0:
                log.warning("%s during %s; retrying with backoff: %s", exc.code, what, exc)
            await asyncio.sleep(RETRY_DELAYS[min(attempt, len(RETRY_DELAYS) - 1)])
            attempt += 1
            continue
        if attempt:
            log.warning("payload store back after %d retries during %s", attempt, what)
        return result


def _obligations_key(ref: str) -> str:
    """The obligation set of the blob ``ref``, under the blob's own key prefix.

    The braces hash-tag both keys onto one Redis Cluster slot so MULTI covers them (the
    blob's key holds no braces: the whole key is its tag).
    """
    if ref.startswith("vf:") and ":" in ref[3:]:
        prefix = ref[: ref.index(":", 3) + 1]  # vf:<flow>:
        return f"{prefix}{OBLIGATIONS_PREFIX}{{{ref}}}"
    return f"vf-blobobl-{{{ref}}}"  # a blob written before the flow's prefix


# KEYS: blob, obligations; ARGV: reader. 1 when this reader's release deleted the blob.
_RELEASE = """
if redis.call('SREM', KEYS[2], ARGV[1]) == 1 and redis.call('SCARD', KEYS[2]) == 0 then
  redis.call('UNLINK', KEYS[1], KEYS[2])  -- freed off the main thread
  return 1
end
return 0
"""


class PayloadMissing(Exception):
    """The envelope points at a blob that is gone (expired or never written)."""


class PayloadUnreadable(Exception):
    """The store answered, but with an error about this one payload: the key the envelope
    names holds something else (a set, a list: ``WRONGTYPE``), or the store refused the
    read. The message is dead-lettered; the store is not at fault for the next one."""

    code = "VF_BLOB_UNREADABLE"


class BlobStore:
    """Offloaded payloads keyed by message id, released by named readers."""

    def __init__(
        self,
        client: Redis | None = None,
        *,
        ttl_seconds: int,
        prefix: str,
        url: str = "",
        auth: StoreAuth | None = None,
    ) -> None:
        self._client = client
        self.url = url
        self.ttl = ttl_seconds
        self.prefix = prefix  # store_key_prefix(flow): every key this store writes
        self.auth = auth or StoreAuth()
        self._script: AsyncScript | None = None

    @classmethod
    def from_url(
        cls, url: str, *, ttl_seconds: int, prefix: str, auth: StoreAuth | None = None
    ) -> BlobStore:
        """A store for ``url``; its client is made on first use, the URL is checked now.
        ``auth``: the user and password to present (the URL's own, when it has them, win)."""
        if urlsplit(url).scheme not in SCHEMES:
            raise ValueError(
                "Redis URL must specify one of the following schemes (redis://, rediss://, unix://)"
            )
        return cls(ttl_seconds=ttl_seconds, prefix=prefix, url=url, auth=auth)

    @property
    def client(self) -> Redis:
        if self._client is None:
            from redis.asyncio import Redis

            self._client = Redis.from_url(
                self.url, socket_timeout=10, socket_connect_timeout=5, **self.auth.options(self.url)
            )
        return self._client

    @property
    def _release(self) -> AsyncScript:
        if self._script is None:
            self._script = self.client.register_script(_RELEASE)
        return self._script

    @_typed
    async def put(self, message_id: str, data: bytes, *, readers: Iterable[str]) -> str:
        """Store ``data`` for ``readers``; the same message id always maps to the same key."""
        ref = f"{self.prefix}{BLOB_PREFIX}{message_id}"
        names = sorted(set(readers))
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.set(ref, data, ex=self.ttl)
            if names:
                pipe.sadd(_obligations_key(ref), *names)
                pipe.expire(_obligations_key(ref), self.ttl)
            await pipe.execute()
        return ref

    @_typed
    async def get(self, ref: str) -> bytes:
        from redis.exceptions import RedisError

        try:
            data = await self.client.get(ref)
        except RedisError as exc:
            if isinstance(exc, _transient()) or (refused(exc) and not _key_refused(exc)):
                raise  # the store is away (BLOB-6), or refuses this client (StoreRefused)
            raise PayloadUnreadable(f"payload {ref} cannot be read from the store: {exc}") from exc
        if data is None:
            raise PayloadMissing(f"payload {ref} is not in the store (expired or never written)")
        return data if isinstance(data, bytes) else data.encode()

    @_typed
    async def release(self, ref: str, *, reader: str) -> bool:
        """Drop ``reader``'s obligation; delete the blob when none is left. True if deleted.

        One atomic script: the reader that removes the last name deletes blob and set
        in the same step, so no crash can leave an unowned blob behind.
        """
        deleted = await self._release(keys=[ref, _obligations_key(ref)], args=[reader])
        return bool(deleted)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()


def _key_refused(exc: BaseException) -> bool:
    """A ``NOPERM`` about the key read (outside the flow's own), not about the command."""
    from redis import exceptions as redis_errors

    return isinstance(exc, redis_errors.NoPermissionError) and "key" in str(exc).lower()


def idempotency_key(*, flow_id: str, node: str, message_id: str, generation: str = "") -> str:
    """IDEM-1's record key; a generation's records are its own (it re-applies everything)."""
    scope = f"{flow_id}:{generation}" if generation else flow_id
    digest = hashlib.sha256(f"{scope}:{node}:{message_id}".encode()).hexdigest()
    return f"{store_key_prefix(flow_id)}{IDEM_PREFIX}{digest}"


class AppliedLog:
    """What an idempotent consumer has applied, so a redelivery is acked, not re-applied."""

    def __init__(self, client: Redis, *, flow_id: str, node: str, generation: str = "") -> None:
        self.client = client
        self.flow_id = flow_id
        self.node = node
        self.generation = generation

    def key(self, message_id: str) -> str:
        return idempotency_key(
            flow_id=self.flow_id,
            node=self.node,
            message_id=message_id,
            generation=self.generation,
        )

    @_typed
    async def seen(self, message_id: str) -> bool:
        return bool(await self.client.exists(self.key(message_id)))

    @_typed
    async def mark(self, message_id: str) -> None:
        await self.client.set(self.key(message_id), b"1", ex=IDEM_TTL)
