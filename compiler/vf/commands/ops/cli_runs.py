"""``vf runs`` and ``vf teardown``: what a flow left on a broker, and reclaiming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from vf.commands.ops import teardown
from vf.commands.ops.options import broker_options, execute, flow_option
from vf.commands.ops.output import age, confirm_required, emit, now, table
from vf.commands.ops.runs import RunState, flow_runs
from vf.commands.ops.select import Selector, checked_many, selector_option
from vf.commands.ops.session import Broker, with_broker
from vf.errors import EnvironmentProblem, VfError


def run_row(run: RunState) -> dict[str, Any]:
    return {
        "run": run.run_id,
        "generation": run.generation,
        "streams": len(run.streams),
        "durables": len(run.durables),
        "live_readers": len(run.live_readers),
        "state": _state(run),
        "pending": run.pending,
        "messages": run.messages,
        "dead_letters": run.dead_letters,
        "age": age(run.age_seconds(now())),
        "created": None if run.created is None else run.created.isoformat(),
    }


def _state(run: RunState) -> str:
    """live (a replica reads it), finished (a BATCH generation done), or idle (neither:
    stopped, or with Jobs waiting to be scheduled or in restart back-off)."""
    if run.live_readers:
        return "live"
    return "finished" if run.finished else "idle"


_COLUMNS = (
    "run",
    "generation",
    "state",
    "streams",
    "durables",
    "pending",
    "messages",
    "dead_letters",
    "age",
)


def runs_table(runs: list[RunState]) -> str:
    rows = [run_row(r) for r in runs]
    return table(
        [c.upper().replace("_", " ") for c in _COLUMNS],
        [[r[c] or "-" if c == "generation" else r[c] for c in _COLUMNS] for r in rows],
    )


@click.command("runs")
@flow_option
@broker_options
def runs_command(*, flow: str, nats_url: str, timeout: float, fmt: str) -> None:
    """The runs of a flow on a broker: streams, durables, pending, dead letters, age."""

    def action() -> None:
        runs = with_broker(nats_url, lambda b: flow_runs(b.js, flow), timeout=timeout)
        detail = [{**run_row(r), "stream_names": r.streams} for r in runs]
        emit(
            fmt,
            {"flow": flow, "runs": detail},
            lambda: runs_table(runs) if runs else f"no runs of flow {flow} on this broker",
        )

    execute(action)


def _selection(
    runs: list[RunState],
    *,
    run: str | None,
    generation: str | None,
    superseded: bool,
    deployed: teardown.Deployed | None,
    unfinished: frozenset[str],
    flow: str,
) -> teardown.Selection:
    if superseded:
        return teardown.select_superseded(runs, deployed, unfinished=unfinished)
    assert run is not None
    return teardown.select_run(runs, Selector(flow=flow, run=run, generation=generation))


def _check_request(
    run: str | None,
    superseded: bool,
    tree: Path | None,
    generation: str | None,
    unfinished: tuple[str, ...],
) -> None:
    misplaced = ((tree is not None or unfinished) and not superseded) or (
        generation is not None and not run
    )
    if (run is None) == (not superseded) or misplaced:
        raise VfError(
            "VF_TEARDOWN_ARGS",
            "vf teardown needs exactly one of --run RUN or --superseded "
            "(--tree and --unfinished go with --superseded, --generation with --run)",
            "name the run to remove, or pass --superseded [--tree DIR]",
            "vf teardown",
        )


def _check_unfinished(named: frozenset[str], selection: teardown.Selection, flow: str) -> None:
    """Every ``--unfinished`` names a superseded generation: a mistyped one would leave
    the generation the operator meant in place while saying nothing."""
    superseded = {r.generation for r in (*selection.remove, *selection.held)}
    unknown = sorted(named - superseded)
    if unknown:
        raise VfError(
            "VF_TEARDOWN_ARGS",
            f"--unfinished {', '.join(unknown)} names no superseded generation of flow {flow}",
            "name a generation the teardown keeps as unfinished (vf runs lists them)",
            f"flow {flow}",
        )


def _refuse_live(selection: teardown.Selection, force: bool) -> None:
    live = selection.live
    if not live or force:
        return
    busy = [f"{d.stream}/{d.name}" for r in live for d in r.live_readers]
    raise EnvironmentProblem(
        "VF_RUN_LIVE",
        f"{len(live)} run(s) still have live readers: {', '.join(busy)}; nothing was removed",
        "stop the run first (remove its workloads, or wait for it to finish), or pass --force",
        ", ".join(f"{r.run_id}/{r.generation or '-'}" for r in live),
    )


def _teardown_text(report: dict[str, Any]) -> str:
    lines = []
    verb = "removed" if report["confirmed"] else "would remove"
    for run in report["runs"]:
        lines.append(
            f"{verb} run {run['run']} generation {run['generation'] or '-'} "
            f"({run['state']}): {len(run['stream_names'])} stream(s)"
        )
        lines += [f"  {name}" for name in run["stream_names"]]
    lines += [f"removed replica-slot bucket {n}" for n in report["removed"] if n.startswith("KV_")]
    held = {(r["run"], r["generation"]): r for r in report["held"]}
    for run in report["kept"]:
        line = f"kept run {run['run']} generation {run['generation'] or '-'}"
        hold = held.get((run["run"], run["generation"]))
        if hold is not None:
            line += (
                f": superseded but not finished ({hold['unfinished']}); its Jobs may be "
                f"waiting or restarting. Pass --unfinished {run['generation']} to remove it"
            )
        lines.append(line)
    if report["remaining"]:
        lines.append("still on the broker: " + ", ".join(report["remaining"]))
    if not report["runs"]:
        lines.append("nothing to remove")
    return "\n".join(lines)


async def _teardown(
    broker: Broker, flow: str, options: dict[str, Any], *, yes: bool, force: bool
) -> dict[str, Any]:
    runs = await flow_runs(broker.js, flow)
    selection = _selection(runs, flow=flow, **options)
    _check_unfinished(options["unfinished"], selection, flow)
    report: dict[str, Any] = {
        "flow": flow,
        "confirmed": yes,
        "runs": [{**run_row(r), "stream_names": r.streams} for r in selection.remove],
        "kept": [run_row(r) for r in selection.keep],
        "held": [{**run_row(r), "unfinished": r.unfinished_reason()} for r in selection.held],
        "removed": [],
        "remaining": [],
    }
    if not yes or not selection.remove:
        return report
    _refuse_live(selection, force)
    outcome = await teardown.remove(broker.js, selection, flow)
    report.update(removed=outcome.removed, remaining=outcome.remaining)
    return report


@click.command("teardown")
@flow_option
@selector_option("run", "Remove this run (every generation).")
@selector_option("generation", "Only this generation of --run.")
@click.option("--superseded", is_flag=True, help="Remove every run the tree does not deploy.")
@click.option(
    "--tree",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    metavar="DIR",
    help="The committed tree whose runs to keep (default: keep the newest run).",
)
@click.option(
    "--unfinished",
    multiple=True,
    metavar="GEN",
    callback=checked_many,
    help="With --superseded: also remove this BATCH generation although it has not "
    "finished (its Jobs may be waiting or restarting). Repeatable.",
)
@click.option("--yes", is_flag=True, help="Delete (nothing happens without it).")
@click.option("--force", is_flag=True, help="Also remove runs whose readers are still live.")
@broker_options
def teardown_command(
    *,
    flow: str,
    run: str | None,
    generation: str | None,
    superseded: bool,
    tree: Path | None,
    unfinished: tuple[str, ...],
    yes: bool,
    force: bool,
    nats_url: str,
    timeout: float,
    fmt: str,
) -> None:
    """Delete a run's streams and durables, or every superseded run of a flow. The DLQ stays."""

    def action() -> int:
        _check_request(run, superseded, tree, generation, unfinished)
        # the tree is read before the broker is touched: a tree vf cannot use changes nothing
        deployed = teardown.tree_runs(tree, flow) if tree is not None else None
        options = {
            "run": run,
            "generation": generation,
            "superseded": superseded,
            "deployed": deployed,
            "unfinished": frozenset(unfinished),
        }
        report = with_broker(
            nats_url, lambda b: _teardown(b, flow, options, yes=yes, force=force), timeout=timeout
        )
        emit(fmt, report, lambda: _teardown_text(report))
        if not yes and report["runs"]:
            raise confirm_required("teardown", "--yes", where=f"flow {flow}")
        if report["remaining"]:
            raise EnvironmentProblem(
                "VF_TEARDOWN_INCOMPLETE",
                f"{len(report['remaining'])} stream(s) are still on the broker: "
                + ", ".join(report["remaining"]),
                "run vf teardown again; if they stay, a provision Job or worker is re-creating "
                "them: stop it first",
                f"flow {flow}",
            )
        return 0

    execute(action)
