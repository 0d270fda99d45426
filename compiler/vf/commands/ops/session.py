"""One bounded conversation with a broker (and, when asked, a payload store).

Every operator command finishes or fails within its ``--timeout``: the broker's port
is checked before the client connects (a client connect to a port nobody listens on
can block for minutes), and the whole conversation runs under one deadline. Failing
to reach the broker or the store is an environment problem: exit 3, the URL, the fix;
so is a broker or store that refuses the credentials of the environment
(``VF_NATS_USER``/``VF_NATS_PASSWORD``, ``VF_NATS_TOKEN`` or ``VF_NATS_CREDS``;
``VF_BLOB_REDIS_USER``/``VF_BLOB_REDIS_PASSWORD``): ``VF_BROKER_AUTH``, ``VF_STORE_AUTH``;
and a store whose TLS connection fails: ``VF_STORE_TLS`` (ADR 0226).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit

from nats.aio.client import Client
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from redis.asyncio import Redis
from redis.exceptions import AuthenticationError, NoPermissionError, RedisError
from redis.exceptions import TimeoutError as RedisTimeout

from vf.errors import EnvironmentProblem
from vf_runtime.broker.client import BrokerError, connect
from vf_runtime.clientauth import CredentialsError, store_auth
from vf_runtime.credentials import STORE_PASSWORD_ENV, STORE_TLS_CA_ENV, STORE_USER_ENV
from vf_runtime.redact import redact
from vf_runtime.store.blobstore import speaks_plaintext, tls_failure

T = TypeVar("T")
API_TIMEOUT = 5.0


@dataclass(frozen=True)
class Broker:
    """A connected client, its JetStream context and, when ``--redis`` was given, the store."""

    client: Client
    js: JetStreamContext
    store: Redis | None = None


def _unreachable(code: str, url: str, why: str, fix: str = "") -> EnvironmentProblem:
    shown = redact(url)
    return EnvironmentProblem(
        code,
        f"cannot use the broker at {shown}: {redact(why)}",
        fix
        or f"check that NATS JetStream listens at {shown} (nats-server -js) and is reachable "
        "from here, or pass the right --nats URL",
        shown,
    )


def _store(redis_url: str) -> Redis:
    """A client of the store at ``redis_url`` with the environment's store credentials."""
    try:
        auth = store_auth()
    except CredentialsError as exc:
        raise EnvironmentProblem(exc.code, str(exc), exc.fix, redact(redis_url)) from exc
    options = auth.options(redis_url)
    return Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=5, **options)


async def _converse(
    url: str, redis_url: str | None, timeout: float, body: Callable[[Broker], Awaitable[T]]
) -> T:
    # a refused connection is an answer: fail at once, wait only for silence
    store = _store(redis_url) if redis_url else None  # connects on its first command
    client = await connect(url, timeout=timeout, name="vf-operator", refused_fails=True)
    try:
        if store is not None:
            await _check_store(store, redis_url or "")
        broker = Broker(client=client, js=client.jetstream(timeout=API_TIMEOUT), store=store)
        return await asyncio.wait_for(body(broker), timeout=timeout)
    finally:
        if store is not None:
            await store.aclose()
        await client.close()


async def _check_store(store: Redis, url: str) -> None:
    shown = redact(url)
    try:
        await store.ping()
    except (AuthenticationError, NoPermissionError) as exc:  # a ConnectionError, too
        raise EnvironmentProblem(
            "VF_STORE_AUTH",
            f"the payload store at {shown} refused this client: {redact(str(exc))}",
            f"set {STORE_USER_ENV} and {STORE_PASSWORD_ENV} to a user the store knows (from "
            "the Secret its ACL reads), or pass a --redis URL that carries them",
            shown,
        ) from exc
    except (RedisError, OSError) as exc:
        why = await _tls_problem(url, exc)
        if why:
            raise EnvironmentProblem(
                "VF_STORE_TLS",
                f"the TLS connection to the payload store at {shown} failed: {redact(why)}",
                f"point {STORE_TLS_CA_ENV} at the ca.crt of the store's TLS Secret, reach it "
                "by a name its certificate carries, and use rediss:// only for a store that "
                "speaks TLS",
                shown,
            ) from exc
        raise EnvironmentProblem(
            "VF_STORE_UNAVAILABLE",
            f"cannot reach the payload store at {shown}: {redact(str(exc))}",
            f"check that Redis/Valkey listens at {shown}, or pass the right --redis URL",
            shown,
        ) from exc


async def _tls_problem(url: str, exc: BaseException) -> str:
    """Why the store's TLS failed (a certificate, or a plaintext store behind a
    ``rediss://`` URL that timed out the handshake); empty when it is not TLS's fault."""
    failure = tls_failure(exc)
    if failure is not None:
        return str(failure)
    where = urlsplit(url)
    if not isinstance(exc, RedisTimeout) or where.scheme != "rediss":
        return ""
    if await speaks_plaintext(where.hostname or "localhost", where.port or 6379):
        return "it does not speak TLS (it answered a plaintext PING)"
    return ""


def with_broker(
    url: str,
    body: Callable[[Broker], Awaitable[T]],
    *,
    timeout: float,
    redis_url: str | None = None,
) -> T:
    """Run ``body`` against the broker at ``url``; every failure to talk to it is exit 3."""
    try:
        return asyncio.run(_converse(url, redis_url, timeout, body))
    except BrokerError as exc:
        raise _unreachable(exc.code, url, str(exc), exc.fix) from exc
    except TimeoutError as exc:
        raise _unreachable("VF_BROKER_TIMEOUT", url, f"no answer within {timeout:g}s") from exc
    except NatsError as exc:
        raise _unreachable("VF_BROKER_API", url, f"{type(exc).__name__}: {exc}") from exc


def fetch_blob(redis_url: str, ref: str, *, timeout: float) -> bytes | None:
    """An offloaded payload's bytes, None when the store no longer has them; exit 3 when
    the store cannot be reached."""

    async def fetch() -> bytes | None:
        store = _store(redis_url)
        try:
            await _check_store(store, redis_url)
            data = await asyncio.wait_for(store.get(ref), timeout=timeout)
        finally:
            await store.aclose()
        return None if data is None else data if isinstance(data, bytes) else data.encode()

    return asyncio.run(fetch())
