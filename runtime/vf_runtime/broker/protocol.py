"""Publishes on a worker's hot path, written as the protocol lines nats-py itself writes.

``Client.publish`` validates its subjects, encodes its headers field by field and
schedules a flush, once per message; a worker sends two or three messages per item
(an output, its input's ack) to subjects it built itself or the broker gave it. The
functions here queue the same ``PUB``/``HPUB`` bytes on the client's outgoing buffer
and kick its flusher once per batch (through ``vf_runtime.broker.nats_internals``), so
the broker sees exactly what it would have seen. While the client is not connected, or
where the installed nats-py lacks what that module checks for, they fall back to
``Client.publish``, which buffers or refuses during a reconnection as it always does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from nats.aio.client import Client
from nats.errors import MaxPayloadError

from vf_runtime.broker import nats_internals

log = logging.getLogger("vf.worker")
_CRLF = b"\r\n"


def header_block(headers: Mapping[str, str]) -> bytes:
    """A NATS header block (``NATS/1.0`` and ``Key: Value`` lines) for trusted headers.

    Keys and values are vf's own (message ids are hex digits), so nothing needs the
    trimming and checks ``Client.publish`` applies to arbitrary input.
    """
    lines = "".join([f"{key}: {value}\r\n" for key, value in headers.items()])
    return f"NATS/1.0\r\n{lines}\r\n".encode()


def _direct(client: Client) -> bool:
    """Whether to write to the buffer: connected, and nats-py has what vf writes through."""
    return nats_internals.AVAILABLE and client.is_connected and not client.is_draining


async def hpub(
    client: Client, subject: str, data: bytes, *, reply: str, headers: Mapping[str, str]
) -> None:
    """Publish ``data`` with ``headers`` to ``subject``, replies going to ``reply``."""
    if not _direct(client):
        await client.publish(subject, data, reply=reply, headers=dict(headers))
        return
    if len(data) > client.max_payload:
        raise MaxPayloadError
    block = header_block(headers)
    command = f"HPUB {subject} {reply} {len(block)} {len(block) + len(data)}\r\n".encode()
    await nats_internals.queue(
        client, b"".join((command, block, data, _CRLF)), messages=1, size=len(data)
    )


async def publish_empty(client: Client, subjects: Iterable[str]) -> None:
    """An empty message to each subject, in order: JetStream's ack, one write for all.

    Failures are logged, never raised: an ack that does not arrive only means the
    broker redelivers once the lease runs out, which de-duplication absorbs.
    """
    targets = list(subjects)
    if not targets:
        return
    if not _direct(client):
        for subject in targets:
            try:
                await client.publish(subject)
            except Exception as exc:
                log.warning("could not ack a message: %s", exc)
        return
    lines = b"".join(b"PUB %s  0\r\n\r\n" % s.encode() for s in targets)
    try:
        await nats_internals.queue(client, lines, messages=len(targets), size=0)
    except Exception as exc:
        log.warning("could not ack %d message(s): %s", len(targets), exc)
