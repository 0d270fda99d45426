"""``vf debug decode``: an envelope from a file, stdin, a dead letter; in human form."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from vf.commands.ops import dlq
from vf.commands.ops.decode import MAX_INPUT_BYTES, blob_ref, describe, parse, read_envelope
from vf.commands.ops.options import execute, redis_option
from vf.commands.ops.output import FORMATS, emit, fields_text
from vf.commands.ops.session import Broker, fetch_blob, with_broker
from vf.errors import VfError
from vf_runtime.wire import Envelope


@click.group("debug")
def debug_group() -> None:
    """Looking inside what a flow sends."""


def _read(source: str) -> bytes:
    """At most ``MAX_INPUT_BYTES`` of stdin or of the file (a pipe or a device too: the
    user named it), never more: ``/dev/zero`` is refused once the bound is passed."""
    try:
        if source == "-":
            data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            with Path(source).open("rb") as handle:
                data = handle.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise VfError(
            "VF_DECODE_INPUT",
            f"cannot read {source}: {exc.strerror or exc}",
            "pass a file holding the message, or - to read it from stdin",
            source,
        ) from None
    if len(data) > MAX_INPUT_BYTES:
        raise VfError(
            "VF_DECODE_INPUT",
            f"{source} holds more than {MAX_INPUT_BYTES} bytes, more than any message",
            "pass the one message to decode (nats stream get writes one)",
            source,
        )
    return data


def _letter_bytes(letter_id: str, nats_url: str | None, timeout: float) -> bytes:
    if nats_url is None:
        raise VfError("VF_DECODE_INPUT", "--dlq needs the broker", "pass --nats URL", letter_id)
    flow, seq = dlq.parse_id(letter_id)

    async def body(broker: Broker) -> bytes:
        return (await dlq.read_letter(broker.js, flow, seq)).data

    return with_broker(nats_url, body, timeout=timeout)


def _decoded(envelope: Envelope, redis_url: str | None, timeout: float) -> dict[str, Any]:
    ref = blob_ref(envelope)
    if ref is None or redis_url is None:
        return describe(envelope)
    resolved = fetch_blob(redis_url, ref, timeout=timeout)
    found = describe(envelope, resolved=resolved)
    if resolved is None:
        found["payload_store"] = f"{ref} is not in the store (expired or released)"
    return found


@debug_group.command("decode")
@click.argument("source", metavar="[FILE|-]", required=False)
@click.option("--dlq", "letter_id", default=None, metavar="ID", help="Decode this dead letter.")
@click.option(
    "--encoding",
    type=click.Choice(["auto", "raw", "hex", "base64", "json"]),
    default="auto",
    show_default=True,
    help="How the input holds the bytes.",
)
@click.option(
    "--nats",
    "nats_url",
    default=None,
    envvar="VF_NATS_URL",
    metavar="URL",
    help="Broker of --dlq (default: $VF_NATS_URL).",
)
@redis_option
@click.option("--timeout", type=click.FloatRange(0.5, 600), default=10.0, show_default=True)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
def decode_command(
    *,
    source: str | None,
    letter_id: str | None,
    encoding: str,
    nats_url: str | None,
    redis_url: str | None,
    timeout: float,
    fmt: str,
) -> None:
    """An envelope in human form: type, ids, trace, metadata, a bounded payload."""

    def action() -> None:
        if (source is None) == (letter_id is None):
            raise VfError(
                "VF_DECODE_INPUT",
                "vf debug decode needs FILE, - or --dlq ID (one of them)",
                "pass the file of the message, - for stdin, or --dlq FLOW:SEQ",
                "vf debug decode",
            )
        if letter_id is not None:
            envelope = parse(_letter_bytes(letter_id, nats_url, timeout), where=letter_id)
        else:
            assert source is not None
            where = "stdin" if source == "-" else source
            envelope = read_envelope(_read(source), encoding=encoding, where=where)
        found = _decoded(envelope, redis_url, timeout)
        emit(fmt, found, lambda: "\n".join(fields_text(found)))

    execute(action)
