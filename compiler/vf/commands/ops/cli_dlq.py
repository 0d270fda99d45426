"""``vf dlq ls|show|replay|purge``: find, inspect, replay and purge a flow's dead letters."""

from __future__ import annotations

from typing import Any

import click
from nats.errors import Error as NatsError

from vf.commands.ops import dlq, replay
from vf.commands.ops.decode import blob_ref, describe, parse
from vf.commands.ops.dlq import DeadLetter
from vf.commands.ops.options import broker_options, execute, flow_option, redis_option
from vf.commands.ops.output import age, confirm_required, emit, fields_text, now, table
from vf.commands.ops.select import Selector, selectors
from vf.commands.ops.session import Broker, with_broker
from vf.errors import EXIT_ENVIRONMENT, VfError


@click.group("dlq")
def dlq_group() -> None:
    """A flow's dead letters: list, show, replay, purge."""


def _limit(func: Any) -> Any:
    return click.option(
        "--limit", type=click.IntRange(1), default=dlq.LIST_LIMIT, show_default=True
    )(func)


def _row(letter: DeadLetter) -> dict[str, Any]:
    seconds = None if letter.time is None else (now() - letter.time).total_seconds()
    return {
        "id": letter.id,
        "node": letter.node,
        "run": letter.run_id,
        "generation": letter.generation,
        "code": letter.code,
        "disposition": letter.header("VF-Disposition"),
        "delivered": letter.delivered(),
        "age": age(seconds),
        "time": None if letter.time is None else letter.time.isoformat(),
        "reason": letter.reason,
    }


def _more(found: list[DeadLetter], limit: int) -> tuple[list[DeadLetter], bool]:
    return found[:limit], len(found) > limit


@dlq_group.command("ls")
@flow_option
@selectors
@_limit
@broker_options
def ls_command(*, limit: int, nats_url: str, timeout: float, fmt: str, **chosen: str) -> None:
    """List dead letters: origin node, run, code, disposition, deliveries, age, reason."""
    which = Selector(**chosen)
    flow = which.flow

    def action() -> None:
        found = with_broker(
            nats_url, lambda b: dlq.read_letters(b.js, which, limit=limit), timeout=timeout
        )
        shown, more = _more(found, limit)
        rows = [_row(letter) for letter in shown]

        def human() -> str:
            keys = (
                "id",
                "node",
                "run",
                "generation",
                "code",
                "disposition",
                "delivered",
                "age",
                "reason",
            )
            body = table([k.upper() for k in keys], [[r[k] for k in keys] for r in rows])
            tail = f"\n{len(rows)} dead letter(s)" + (
                f"; more exist (raise --limit above {limit})" if more else ""
            )
            return (body if rows else f"no dead letters for flow {flow}") + (tail if rows else "")

        emit(fmt, {"dead_letters": rows, "more": more}, human)

    execute(action)


async def _record(letter: DeadLetter, broker: Broker) -> dict[str, Any]:
    """The record, its headers and its decoded envelope (or why it does not decode)."""
    found: dict[str, Any] = {**_row(letter), "subject": letter.subject, "bytes": len(letter.data)}
    found["headers"] = dict(sorted(letter.headers.items()))
    try:
        envelope = parse(letter.data, where=letter.id)
    except VfError as exc:  # the record is still worth showing without its envelope
        found["envelope_error"] = f"{exc.code}: {exc}"
        return found
    ref, resolved = blob_ref(envelope), None
    if ref is not None and broker.store is not None:
        stored = await broker.store.get(ref)
        resolved = stored.encode() if isinstance(stored, str) else stored
    found["envelope"] = describe(envelope, resolved=resolved)
    return found


@dlq_group.command("show")
@click.argument("letter_id", metavar="ID")
@selectors
@redis_option
@broker_options
def show_command(
    *,
    letter_id: str,
    redis_url: str | None,
    nats_url: str,
    timeout: float,
    fmt: str,
    **chosen: str | None,
) -> None:
    """The whole record: headers, and the envelope with its payload summarised. With
    selectors, only when the record is one they select."""

    def action() -> None:
        flow, seq = dlq.parse_id(letter_id)
        which = Selector(flow=flow, **chosen)

        async def body(broker: Broker) -> dict[str, Any]:
            letter = await dlq.read_letter(broker.js, flow, seq)
            if not dlq.selected(which, letter):
                raise VfError(
                    "VF_DLQ_NOT_FOUND",
                    f"dead letter {letter.id} is not one that {which.describe()} selects",
                    "drop the selectors, or list what they select with vf dlq ls",
                    letter.id,
                )
            return await _record(letter, broker)

        record = with_broker(nats_url, body, timeout=timeout, redis_url=redis_url)
        emit(fmt, record, lambda: _show_text(record))

    execute(action)


def _show_text(record: dict[str, Any]) -> str:
    lines = [f"dead letter {record['id']} on {record['subject']} ({record['bytes']} bytes)"]
    keys = ("node", "run", "generation", "code", "disposition", "delivered", "time")
    lines += fields_text({key: record[key] for key in keys}, indent="  ")
    lines += fields_text({"headers": record["headers"]})
    if "envelope_error" in record:
        lines.append(f"envelope: {record['envelope_error']}")
    else:
        lines += fields_text({"envelope": record["envelope"]})
    return "\n".join(lines)


async def _replay(broker: Broker, which: Selector, limit: int, *, dry_run: bool) -> dict[str, Any]:
    found, more = _more(await dlq.read_letters(broker.js, which, limit=limit), limit)
    run_id = replay.replay_id()
    results = []
    for letter in found:
        verdict = await replay.judge(broker.js, letter, broker.store)
        row: dict[str, Any] = {"id": letter.id, "node": letter.node, "subject": verdict.subject}
        if not verdict.ok:
            row.update(result="refused", reason=verdict.refused)
        elif dry_run:
            row.update(result="would replay")
        else:
            try:
                seq = await replay.publish(broker.js, verdict, run_id)
            except NatsError as exc:  # the records before it are replayed; say so
                row.update(result="refused", reason=f"the broker did not take it: {exc!r}")
            else:
                row.update(result="replayed", stream_seq=seq)
        results.append(row)
    return {"replay_id": run_id, "dry_run": dry_run, "records": results, "more": more}


def _replay_text(report: dict[str, Any]) -> str:
    rows = report["records"]
    if not rows:
        return "no dead letters matched"
    lines = [
        f"replay {report['replay_id']}"
        + (" (dry run: nothing published)" if report["dry_run"] else "")
    ]
    cells = [
        [
            r["id"],
            r["node"],
            r["result"],
            r.get("reason") or r["subject"] + (f" #{r['stream_seq']}" if "stream_seq" in r else ""),
        ]
        for r in rows
    ]
    lines.append(table(["ID", "NODE", "RESULT", "DETAIL"], cells))
    refused = sum(1 for r in rows if r["result"] == "refused")
    lines.append(
        f"{len(rows) - refused} accepted, {refused} refused"
        + ("; more matched (raise --limit)" if report["more"] else "")
    )
    return "\n".join(lines)


@dlq_group.command("replay")
@flow_option
@selectors
@_limit
@click.option(
    "--yes", is_flag=True, help="Republish the dead letters (nothing happens without it)."
)
@click.option("--dry-run", is_flag=True, help="Only say what would be replayed or refused.")
@redis_option
@broker_options
def replay_command(
    *,
    limit: int,
    yes: bool,
    dry_run: bool,
    redis_url: str | None,
    nats_url: str,
    timeout: float,
    fmt: str,
    **chosen: str,
) -> None:
    """Republish dead letters to their origin node's input, under a replay id."""
    which = Selector(**chosen)
    flow = which.flow

    def action() -> int:
        dry = dry_run or not yes
        report = with_broker(
            nats_url,
            lambda b: _replay(b, which, limit, dry_run=dry),
            timeout=timeout,
            redis_url=redis_url,
        )
        emit(fmt, report, lambda: _replay_text(report))
        if not dry_run and not yes:
            raise confirm_required("dlq replay", "--yes", where=f"flow {flow}")
        refused = any(r["result"] == "refused" for r in report["records"])
        return EXIT_ENVIRONMENT if refused else 0

    execute(action)


@dlq_group.command("purge")
@flow_option
@selectors
@click.option("--yes", is_flag=True, help="Delete the dead letters (nothing happens without it).")
@broker_options
def purge_command(*, yes: bool, nats_url: str, timeout: float, fmt: str, **chosen: str) -> None:
    """Delete the dead letters the selectors select (as vf dlq ls lists them)."""
    which = Selector(**chosen)
    scope = which.describe()

    def action() -> int:
        done = with_broker(
            nats_url, lambda b: dlq.purge(b.js, which, confirmed=yes), timeout=timeout
        )
        count, left = len(done.selected), len(done.remaining)
        data = {
            "scope": scope,
            "selected": done.selected,
            "purged": count - left if yes else 0,
            "remaining": done.remaining,
            "confirmed": yes,
        }
        text = (
            f"purged {count - left} dead letter(s) of {scope}"
            + (f"; still there: {', '.join(done.remaining)}" if left else "")
            if yes
            else f"would purge {count} dead letter(s) of {scope}"
            + (f": {', '.join(done.selected)}" if done.selected else "")
        )
        emit(fmt, data, lambda: text)
        if not yes and count:
            raise confirm_required("dlq purge", "--yes", where=scope)
        return EXIT_ENVIRONMENT if left else 0

    execute(action)


def _add_export() -> None:
    """``vf dlq export`` lives in its own module; it is one of this group's commands."""
    from vf.commands.ops.cli_export import export_command

    dlq_group.add_command(export_command)


_add_export()
