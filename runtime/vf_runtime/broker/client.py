"""Connecting to NATS with bounded waits, and ensuring durables idempotently (streams:
:mod:`vf_runtime.broker.streams`).

"Ensure" means: create what is missing; accept what exists when its settings
match; raise the list of differences when they do not. Credit and ack wait are
the only settings reconciled in place (credit only ever upward), because they
follow replica counts that may change within one run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, StreamConfig
from nats.js.errors import (
    BadRequestError,
    NotFoundError,
    ServiceUnavailableError,
)

from vf_runtime.broker import nats_internals
from vf_runtime.broker.naming import RunNames
from vf_runtime.clientauth import CredentialsError, NatsAuth, nats_auth
from vf_runtime.credentials import NATS_TLS_CA_ENV
from vf_runtime.redact import redact

_STREAM_FIELDS = (
    "subjects",
    "retention",
    "discard",
    "max_msgs",
    "max_bytes",
    "max_msgs_per_subject",
    "max_age",
    "duplicate_window",
)
_CONSUMER_FIELDS = ("filter_subject", "deliver_policy", "ack_policy", "max_deliver")
log = logging.getLogger("vf.broker")


class BrokerError(Exception):
    """The broker is unreachable, or holds topology that contradicts this run's."""

    def __init__(self, code: str, message: str, fix: str = "") -> None:
        super().__init__(redact(message))  # messages quote the URL, which may hold credentials
        self.code = code
        self.fix = fix

    def render(self) -> str:
        """``error[CODE] message``, and the fix on a line of its own when there is one."""
        return f"error[{self.code}] {self}" + (f"\n  = fix: {self.fix}" if self.fix else "")


# The client's credentials are wrong or refused: an environment to correct, not a broker
# to wait for (a worker and the provision Job exit 2 on these, LIFE-5).
AUTH_CODES = frozenset({"VF_BROKER_AUTH", "VF_BROKER_CREDENTIALS", "VF_BROKER_TLS"})
AUTH_FIX = (
    "give the client the credentials of a user the broker knows: VF_NATS_USER and "
    "VF_NATS_PASSWORD, or VF_NATS_TOKEN, or VF_NATS_CREDS (a .creds file's path), from the "
    "Secret the broker's own configuration reads"
)


TLS_FIX = (
    f"point {NATS_TLS_CA_ENV} at the ca.crt of the broker's TLS Secret, use the broker's "
    "Service name (the one its certificate names), and give the broker and its clients the "
    "same tls: in vf.yaml"
)


def _endpoints(url: str) -> list[tuple[str, int]]:
    found = []
    for part in url.split(","):
        parsed = urlsplit(part.strip() if "://" in part else f"nats://{part.strip()}")
        found.append((parsed.hostname or "127.0.0.1", parsed.port or 4222))
    return found


async def wait_for_port(url: str, *, timeout: float, refused_fails: bool = False) -> None:
    """Return once any server of ``url`` accepts TCP; raise after ``timeout`` seconds.

    nats-py can block for minutes on a port nobody listens on, so vf never calls
    ``connect`` before a listener is known to exist. A worker waits for a broker that
    starts after it; with ``refused_fails`` (an operator at a terminal) a refusal from
    every server is an answer, given at once: only silence is waited out.
    """
    deadline = time.monotonic() + timeout
    endpoints = _endpoints(url)
    while True:
        answers = [await asyncio.to_thread(_accepts, host, port) for host, port in endpoints]
        if OPEN in answers:
            return
        if refused_fails and answers and all(a == REFUSED for a in answers):
            raise BrokerError(
                "VF_BROKER_UNAVAILABLE",
                f"the connection to {url} was refused: no server listens there",
            )
        if time.monotonic() >= deadline:
            raise BrokerError(
                "VF_BROKER_UNAVAILABLE",
                f"no NATS server answered at {url} within {timeout:g}s",
            )
        await asyncio.sleep(0.2)


OPEN, REFUSED, SILENT = "open", "refused", "silent"


def _accepts(host: str, port: int) -> str:
    """Whether ``host:port`` takes a TCP connection, refuses it, or says nothing in time."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return OPEN
    except ConnectionRefusedError:
        return REFUSED
    except OSError:
        return SILENT


async def connect(
    url: str,
    *,
    timeout: float,
    name: str,
    on_reconnect: Callable[[], None] | None = None,
    refused_fails: bool = False,
    auth: NatsAuth | None = None,
) -> Client:
    """A connected client with JetStream reachable, or :class:`BrokerError`.

    ``on_reconnect`` runs after every reconnection: requests that were in flight when the
    connection dropped will never be answered, and their owners re-issue them.
    ``refused_fails``: see :func:`wait_for_port`. ``auth``: the credentials to present, by
    default the environment's (:func:`vf_runtime.clientauth.nats_auth`); a server that
    refuses them is ``VF_BROKER_AUTH`` at once: nats-py would retry forever."""
    try:
        auth = nats_auth() if auth is None else auth
    except CredentialsError as exc:
        raise BrokerError(exc.code, str(exc), exc.fix) from exc
    await wait_for_port(url, timeout=timeout, refused_fails=refused_fails)

    async def reconnected() -> None:
        log.info("reconnected to the broker")
        if on_reconnect is not None:
            on_reconnect()

    refused: asyncio.Future[Exception] = asyncio.get_running_loop().create_future()

    async def on_error(error: Exception) -> None:
        if _auth_refused(error) or isinstance(error, ssl.SSLError):
            if not refused.done():
                refused.set_result(error)  # while connecting: VF_BROKER_AUTH or _TLS
            elif connecting.done():  # connected once with them: refused now (rotated?)
                log.warning("the broker refuses this client's credentials: %s", error)
            return
        await _log_error(error)

    options = _options(auth, timeout=timeout)
    client = nats_internals.client()
    servers = [u.strip() for u in url.split(",")]
    connecting = asyncio.ensure_future(
        client.connect(
            servers=servers,
            name=name,
            error_cb=on_error,
            disconnected_cb=_log_disconnect,
            reconnected_cb=reconnected,
            **options,
        )
    )
    await _connected(client, connecting, refused, url=url, auth=auth, timeout=timeout)
    await _require_tls(client, url, auth)
    await _require_jetstream(client, url)
    return client


def _options(auth: NatsAuth, *, timeout: float) -> dict[str, Any]:
    """nats-py's ``connect`` options: reconnect for ever, present ``auth`` (and its CA)."""
    return {  # nats-py declares the two waits int; it takes seconds
        "connect_timeout": min(5.0, timeout),
        "reconnect_time_wait": 0.5,
        "max_reconnect_attempts": -1,
        "allow_reconnect": True,
        **auth.options(),
    }


async def _require_tls(client: Client, url: str, auth: NatsAuth) -> None:
    """A client given a CA speaks TLS or nothing: nats-py upgrades only when the server
    asks it, so a server that does not would get the credentials in the clear."""
    if not auth.ca or nats_internals.requires_tls(client):
        return
    await client.close()
    raise BrokerError(
        "VF_BROKER_TLS",
        f"the broker at {url} does not speak TLS, and this client trusts a CA for it "
        f"({NATS_TLS_CA_ENV}={auth.ca})",
        TLS_FIX,
    )


async def _require_jetstream(client: Client, url: str) -> None:
    try:
        await client.jetstream().account_info()
    except Exception as exc:
        await client.close()
        raise BrokerError(
            "VF_BROKER_NO_JETSTREAM", f"{url} does not offer JetStream (start it with -js): {exc}"
        ) from exc


async def _connected(
    client: Client,
    connecting: asyncio.Future[Any],
    refused: asyncio.Future[Exception],
    *,
    url: str,
    auth: NatsAuth,
    timeout: float,
) -> None:
    """Wait for ``connecting`` to succeed, or raise: the server refused the credentials
    (``refused`` came first), or the connection failed or took longer than ``timeout``."""
    try:
        either: set[asyncio.Future[Any]] = {connecting, refused}
        await asyncio.wait_for(
            asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED), timeout=timeout
        )
        if not connecting.done():
            raise _refusal(url, auth, refused.result())
        connecting.result()
    except BrokerError:
        await _abandon(client, connecting)
        raise
    except Exception as exc:
        await _abandon(client, connecting)
        raise BrokerError("VF_BROKER_UNAVAILABLE", f"cannot connect to {url}: {exc}") from exc


def _auth_refused(error: BaseException) -> bool:
    """Whether the server refused the client's credentials (``Authorization Violation``;
    ``Authentication Timeout`` when it waited for credentials that never came)."""
    if isinstance(error, nats.errors.AuthorizationError):
        return True
    text = str(error).lower()
    return "authorization violation" in text or "authentication" in text


def _refusal(url: str, auth: NatsAuth, error: Exception) -> BrokerError:
    if isinstance(error, ssl.SSLError):
        trusted = (
            f"the CA in {auth.ca}" if auth.ca else f"the system's CAs ({NATS_TLS_CA_ENV} unset)"
        )
        return BrokerError(
            "VF_BROKER_TLS",
            f"the TLS handshake with the broker at {url} failed, trusting {trusted}: {error}",
            TLS_FIX,
        )
    return BrokerError(
        "VF_BROKER_AUTH",
        f"the broker at {url} refused this client {auth.described()}: {error}",
        AUTH_FIX,
    )


async def _abandon(client: Client, connecting: asyncio.Future[None]) -> None:
    """Stop a connection attempt still retrying, and close what it opened."""
    connecting.cancel()
    with contextlib.suppress(BaseException):
        await connecting
    with contextlib.suppress(Exception):
        await client.close()


async def _log_error(error: Exception) -> None:
    # nats-py's default prints a traceback per failed reconnect attempt.
    log.debug("broker connection error: %s", redact(str(error)))


async def _log_disconnect() -> None:
    log.info("disconnected from the broker")


def _normal(value: Any) -> Any:
    if isinstance(value, list):
        return sorted(str(v) for v in value)
    if hasattr(value, "value"):
        return value.value
    if value in (None, -1, 0, 0.0):
        return None
    return value


def stream_differences(want: StreamConfig, have: StreamConfig) -> list[str]:
    """Settings of an existing stream that differ from this run's, as readable lines."""
    diffs = _field_differences(want, have=have, fields=_STREAM_FIELDS)
    diffs += _owner_differences(want.metadata, have.metadata)
    return diffs


def _field_differences(want: Any, *, have: Any, fields: tuple[str, ...]) -> list[str]:
    found = []
    for field in fields:
        wanted, had = _normal(getattr(want, field)), _normal(getattr(have, field))
        if wanted != had:
            found.append(f"{field}: has {had!r}, this run needs {wanted!r}")
    return found


def consumer_differences(want: ConsumerConfig, have: ConsumerConfig) -> list[str]:
    """Semantic settings of an existing durable that differ from this run's."""
    return _field_differences(want, have=have, fields=_CONSUMER_FIELDS)


def _owner_differences(want: dict[str, str] | None, have: dict[str, str] | None) -> list[str]:
    have = have or {}
    return [
        f"metadata {key}: has {have.get(key)!r}, this run needs {value!r}"
        for key, value in sorted((want or {}).items())
        if have.get(key) != value
    ]


T = TypeVar("T")
API_PATIENCE = 60.0  # a JetStream cluster still electing its leaders answers within this
# nats-py's timeout is a builtin TimeoutError too, which is what asyncio.wait_for raises
_TRANSIENT = (TimeoutError, nats.errors.NoRespondersError, ServiceUnavailableError)


async def patiently(call: Callable[[], Awaitable[T]], *, what: str) -> T:
    """Run an idempotent JetStream API step and return its result, asking again while the
    broker cannot answer yet (a starting cluster times out or says it is unavailable); a
    named error after that."""
    deadline, pause = time.monotonic() + API_PATIENCE, 0.5
    while True:
        try:
            return await call()
        except _TRANSIENT as exc:
            if time.monotonic() + pause > deadline:
                raise BrokerError(
                    "VF_BROKER_API",
                    f"JetStream did not answer for {what} within {API_PATIENCE:g}s ({exc!r})",
                ) from exc
            log.info("JetStream not answering yet for %s (%r); asking again", what, exc)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 5.0)


async def delivered_before(js: JetStreamContext, stream: str, durable: str) -> bool:
    """Whether the durable delivered anything before now (asked again while a busy broker
    times out, as creating it was)."""
    info = await patiently(
        lambda: js.consumer_info(stream, durable), what=f"durable {durable} on {stream}"
    )
    return info.delivered is not None and bool(info.delivered.consumer_seq)


async def ensure_consumer(js: JetStreamContext, stream: str, config: ConsumerConfig) -> None:
    """Create the durable, or check it; raise credit and ack wait to what this run needs."""
    what = f"durable {config.durable_name} on {stream}"
    await patiently(lambda: _ensure_consumer(js, stream, config), what=what)


async def _ensure_consumer(js: JetStreamContext, stream: str, config: ConsumerConfig) -> None:
    durable = config.durable_name
    assert durable is not None
    try:
        info = await js.consumer_info(stream, durable)
    except NotFoundError:
        try:
            await js.add_consumer(stream, config)
            return
        except BadRequestError:
            info = await js.consumer_info(stream, durable)
    have = info.config
    diffs = consumer_differences(config, have)
    if diffs:
        raise BrokerError(
            "VF_TOPOLOGY_MISMATCH",
            f"durable {durable} on {stream} exists with other settings: " + "; ".join(diffs),
        )
    credit = max(config.max_ack_pending or 0, have.max_ack_pending or 0)
    if credit != (have.max_ack_pending or 0) or _normal(config.ack_wait) != _normal(have.ack_wait):
        await js.add_consumer(stream, have.evolve(max_ack_pending=credit, ack_wait=config.ack_wait))


async def _publish_plain(
    url: str, *, subject: str, data: bytes, timeout: float, auth: NatsAuth | None = None
) -> None:
    client = await connect(url, timeout=timeout, name="vf-control", auth=auth)
    try:
        await client.publish(subject, data)
        await client.flush(timeout=int(timeout) or 1)
    finally:
        await client.close()


def announce_stop(
    url: str, names: RunNames, *, timeout: float = 3.0, auth: NatsAuth | None = None
) -> None:
    """Publish one control stop for ``names``' run and generation (plain NATS, not
    retained: callers repeat it); ``auth`` as :func:`connect`'s."""
    data = names.stop_payload()
    subject = names.control()
    asyncio.run(_publish_plain(url, subject=subject, data=data, timeout=timeout, auth=auth))
