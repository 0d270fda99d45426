"""Ensuring a stream: made when missing, checked when present, its byte limit reconciled.

A stream whose only differences from this run's are the settings STREAM-6 reconciles in
place (its byte limit, a dead-letter stream's discard policy) is updated, unless
vf-provision capped it as superseded (PROV-6); any other difference is
``VF_TOPOLOGY_MISMATCH``. The broker's refusals are named: no room for the byte limit
(``VF_BROKER_NO_ROOM``, PROV-7), and any other (subjects another stream takes, more
replicas than servers) ``VF_BROKER_REFUSED`` with the server's words (ADR 0244).
"""

from __future__ import annotations

import logging

from nats.js import JetStreamContext
from nats.js.api import StreamConfig, StreamInfo
from nats.js.errors import APIError, BadRequestError, NotFoundError, ServiceUnavailableError

from vf_runtime.broker.client import BrokerError, patiently, stream_differences
from vf_runtime.labels import CAPPED_KEY, ROLE_KEY

log = logging.getLogger("vf.broker")


async def ensure_stream(js: JetStreamContext, config: StreamConfig, *, lift: bool = False) -> None:
    """Create the stream, or check an existing one matches; raise with the differences.

    A stream vf-provision capped as superseded (PROV-6, metadata ``vf.dev/capped``) keeps its
    lower byte limit: a replica of its generation that starts again never lifts it. Only
    ``lift`` (vf-provision making its own run's streams) restores the share and the mark."""
    assert config.name is not None
    await patiently(lambda: _ensure_stream(js, config, lift), what=f"stream {config.name}")


# nats-server's "insufficient storage resources available": a stream's max_bytes is reserved
# against max_file_store when it is made or raised, and this one does not fit what is left
NO_ROOM_ERR_CODE = 10047
NO_ROOM_FIX = (
    "give the broker a larger volume (broker.storage_size; vf sets max_file_store to 90 % of "
    "it), reclaim the flow's superseded streams (vf teardown --superseded, or "
    "broker.reclaim_superseded: true), or lower broker.stream_max_bytes, then provision again"
)


def _no_room(config: StreamConfig, exc: APIError) -> BrokerError:
    return BrokerError(
        "VF_BROKER_NO_ROOM",
        f"the broker has no room for stream {config.name} of max_bytes {config.max_bytes}: "
        f"what is left of its max_file_store is smaller ({exc.err_code} {exc.description})",
        NO_ROOM_FIX,
    )


async def _ensure_stream(js: JetStreamContext, config: StreamConfig, lift: bool) -> None:
    assert config.name is not None
    try:
        await _make_or_update(js, config, lift)
    except APIError as exc:
        if exc.err_code == NO_ROOM_ERR_CODE:
            raise _no_room(config, exc) from exc
        if isinstance(exc, ServiceUnavailableError):
            raise  # JetStream not answering yet: asked again (patiently)
        raise BrokerError(
            "VF_BROKER_REFUSED",
            f"the broker refused stream {config.name} for {', '.join(config.subjects or [])}: "
            f"{exc.err_code} {exc.description}",
            REFUSED_FIX,
        ) from exc


def _reconciled(config: StreamConfig) -> tuple[str, ...]:
    """The settings an existing stream takes from this run's in place (STREAM-6)."""
    if (config.metadata or {}).get(ROLE_KEY) == "dlq":
        return ("max_bytes:", "discard:")
    return ("max_bytes:",)


def _stays_capped(want: StreamConfig, have: StreamConfig) -> bool:
    """Whether ``have`` is a capped superseded stream (PROV-6) that ``want`` would raise."""
    if CAPPED_KEY not in (have.metadata or {}):
        return False
    wanted, had = want.max_bytes or 0, have.max_bytes or 0
    return had > 0 and (wanted <= 0 or wanted > had)


async def _make_or_update(js: JetStreamContext, config: StreamConfig, lift: bool) -> None:
    assert config.name is not None
    try:
        info = await js.stream_info(config.name)
    except NotFoundError:
        try:
            await js.add_stream(config)
            return
        except BadRequestError as exc:
            info = await _made_by_another(js, config, exc)
    diffs = stream_differences(config, info.config)
    if diffs and all(d.startswith(_reconciled(config)) for d in diffs):
        if not lift and _stays_capped(config, info.config):
            log.info(
                "stream %s stays capped at %s bytes (PROV-6)", config.name, info.config.max_bytes
            )
            return
        # a stream made before its byte limit (STREAM-6) takes it, and a dead-letter stream
        # made before its discard policy (ADR 0239) takes that too: JetStream updates both
        await js.update_stream(config)
        return
    if diffs:
        raise BrokerError(
            "VF_TOPOLOGY_MISMATCH",
            f"stream {config.name} exists with other settings: " + "; ".join(diffs),
        )


# what vf-provision and every worker say when the broker refuses a stream for another reason
# than room: nats-server's words (10065 "subjects overlap with an existing stream", 10074
# "replicas > 1 not supported in non-clustered mode", ...) name the cause
REFUSED_FIX = (
    "read the broker's words: a stream of the broker that takes this flow's subjects is "
    "deleted or narrowed (nats stream ls, nats stream info), since each vf stream must be the "
    "only one that takes its subjects; broker.stream_replicas is at most the broker's servers"
)


async def _made_by_another(
    js: JetStreamContext, config: StreamConfig, refused: BadRequestError
) -> StreamInfo:
    """The stream a sibling made concurrently; ``refused`` raised when there is none (the
    broker refused it for another reason)."""
    assert config.name is not None
    try:
        return await js.stream_info(config.name)
    except NotFoundError:
        raise refused from None
