"""``vf dlq export``: the selected dead letters, whole, as JSON lines for a repair run.

A finished BATCH generation does not run again (PROTOCOL GEN-7), so its dead letters are
not replayed into it (ADR 0162). What an operator needs instead is the exact records, to
feed the fixed node in a run of its own: each line holds a record's id, origin node, run,
generation, code, headers and its original bytes (``data_b64``), the form
``vf debug decode --encoding json`` reads. The file is written whole or not at all.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from vf.commands.ops import dlq
from vf.commands.ops.dlq import DeadLetter
from vf.commands.ops.options import broker_options, execute, flow_option
from vf.commands.ops.select import Selector, selectors
from vf.commands.ops.session import with_broker
from vf.errors import VfError


def record(letter: DeadLetter) -> dict[str, Any]:
    """One exported dead letter."""
    return {
        "id": letter.id,
        "seq": letter.seq,
        "subject": letter.subject,
        "node": letter.node,
        "run": letter.run_id,
        "generation": letter.generation,
        "code": letter.code,
        "headers": dict(sorted(letter.headers.items())),
        "data_b64": base64.b64encode(letter.data).decode("ascii"),
    }


def _write(out: str, text: str) -> None:
    if out == "-":
        sys.stdout.write(text)
        return
    path = Path(out)
    try:
        handle, staging = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(staging, path)
    except OSError as exc:
        raise VfError(
            "VF_DLQ_EXPORT",
            f"cannot write {out}: {exc.strerror or exc}",
            "pass --out a file in a folder you can write, or - for standard output",
            out,
        ) from None


@click.command("export")
@flow_option
@selectors
@click.option(
    "--out",
    "out",
    default="-",
    show_default=True,
    metavar="FILE",
    help="Where the JSON lines go (- for standard output).",
)
@broker_options
def export_command(*, out: str, nats_url: str, timeout: float, fmt: str, **chosen: str) -> None:
    """Write the selected dead letters, bytes and all, as JSON lines (nothing is changed)."""
    which = Selector(**chosen)

    def action() -> None:
        found = with_broker(
            nats_url, lambda b: dlq.read_letters(b.js, which, limit=None), timeout=timeout
        )
        lines = [json.dumps(record(letter), sort_keys=True) + "\n" for letter in found]
        _write(out, "".join(lines))
        if out != "-":
            summary = {"exported": len(lines), "out": out, "scope": which.describe()}
            text = f"exported {len(lines)} dead letter(s) of {which.describe()} to {out}"
            click.echo(json.dumps(summary) if fmt == "json" else text, err=True)

    execute(action)
