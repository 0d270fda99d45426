"""Reclaiming runs: delete the streams (and with them the durables) of runs vf created,
and the replica-slot bucket of a run once no generation of it is left.

What to remove is chosen from ownership metadata (``vf.commands.ops.runs``), never by a name
prefix. The flow's dead-letter stream is never removed (PROTOCOL STREAM-5). After
deleting, the broker is asked again: whatever is still there is reported by name.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from vf.commands.ops.runs import RunState, flow_runs
from vf.commands.ops.select import Selector
from vf.errors import VfError
from vf.textio.safe_read import load_json, read_regular

MAX_PLAN_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class Selection:
    """The runs a teardown would remove, the ones it keeps, and the live ones among them."""

    remove: tuple[RunState, ...]
    keep: tuple[RunState, ...]
    held: tuple[RunState, ...] = ()  # kept although superseded: they may still run

    @property
    def live(self) -> list[RunState]:
        return [run for run in self.remove if run.live_readers]


@dataclass(kw_only=True)
class Outcome:
    """What a teardown removed and what, asked again afterwards, is still there."""

    removed: list[str] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Deployed:
    """The runs a tree can deploy: each plan's run and generation, and every generation
    the chart makes of it with ``--set image.tag=T`` (docs/gitops.md section 7): the
    plan's first 7 characters, ``_`` and 8 hex digits of the tag's SHA-256, exactly as
    ``vf.generation`` in the chart's ``_helpers.tpl`` writes it."""

    runs: frozenset[tuple[str, str]]

    def deploys(self, run_id: str, generation: str) -> bool:
        if (run_id, generation) in self.runs:
            return True
        base, mark, tag = generation[:-9], generation[-9:-8], generation[-8:]
        retagged = mark == "_" and len(tag) == 8 and all(c in _HEX for c in tag)
        return retagged and any(run == run_id and gen and gen[:7] == base for run, gen in self.runs)


_HEX = frozenset("0123456789abcdef")


def _plan(path: Path) -> dict[str, Any]:
    try:  # a planted link, FIFO or endless nesting is refused by name
        plan = load_json(read_regular(path, limit=MAX_PLAN_BYTES))
        if not isinstance(plan, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        raise VfError(
            "VF_TEARDOWN_TREE",
            f"cannot read {path.name}: {exc}",
            "recompile the tree with this vf (vf compile GRAPH --out DIR)",
            str(path),
        ) from None
    return plan


def tree_runs(tree: Path, flow_id: str) -> Deployed:
    """What every environment of ``tree`` deploys of ``flow_id``; a named error when
    the tree holds no plan of that flow (a wrong path, a renamed flow)."""
    paths = sorted((tree / "plan").glob("*.json")) if (tree / "plan").is_dir() else []
    if not paths:
        raise VfError(
            "VF_TEARDOWN_TREE",
            f"{tree} holds no plan/<env>.json, so the runs it deploys are unknown",
            "pass the directory vf compile --out wrote (the committed tree)",
            str(tree),
        )
    plans = [_plan(path) for path in paths]
    runs = frozenset(
        (str(plan.get("run_id", "")), str(plan.get("generation") or ""))
        for plan in plans
        if plan.get("flow_id") == flow_id
    )
    if not runs:
        others = sorted({str(plan.get("flow_id")) for plan in plans})
        raise VfError(
            "VF_TEARDOWN_TREE",
            f"{tree} deploys no run of flow {flow_id} (its plans are of {', '.join(others)}); "
            "every run of the flow would count as superseded, so nothing is removed",
            f"pass the tree that deploys {flow_id}, or the flow id that tree deploys",
            str(tree),
        )
    return Deployed(runs=runs)


def select_run(runs: list[RunState], which: Selector) -> Selection:
    """The runs ``which`` selects: every generation of its run (or only its generation)."""
    chosen = [r for r in runs if which.selects(run=r.run_id, generation=r.generation)]
    return Selection(remove=tuple(chosen), keep=tuple(r for r in runs if r not in chosen))


def select_superseded(
    runs: list[RunState], deployed: Deployed | None, *, unfinished: frozenset[str] = frozenset()
) -> Selection:
    """Every run but those ``deployed`` (without a tree, every run but the newest), and
    but BATCH generations that have not finished unless ``unfinished`` names them: a
    generation whose Jobs wait to be scheduled or restart has no live reader, yet runs."""
    if deployed is None:
        deployed = Deployed(runs=frozenset({runs[-1].key} if runs else ()))
    superseded = [r for r in runs if not deployed.deploys(r.run_id, r.generation)]
    held = [
        r for r in superseded if r.generation and not r.finished and r.generation not in unfinished
    ]
    remove = [r for r in superseded if r not in held]
    return Selection(
        remove=tuple(remove), keep=tuple(r for r in runs if r not in remove), held=tuple(held)
    )


async def remove(js: JetStreamContext, selection: Selection, flow_id: str) -> Outcome:
    """Delete the selected runs' streams, and the replica-slot bucket of each run none of
    whose generations is kept; then report what is still on the broker."""
    outcome = Outcome()
    for run in selection.remove:
        for stream in run.streams:
            with contextlib.suppress(NotFoundError):  # gone already (a provision Job)
                await js.delete_stream(stream)
            outcome.removed.append(stream)
    buckets = _slot_streams(selection)
    for stream in buckets:
        with contextlib.suppress(NotFoundError):  # no replica ever leased an ordinal
            await js.delete_stream(stream)
            outcome.removed.append(stream)
    wanted = {r.key for r in selection.remove}
    after = [r for r in await flow_runs(js, flow_id) if r.key in wanted]
    outcome.remaining = sorted(
        [s for r in after for s in r.streams] + [s for s in buckets if await _exists(js, s)]
    )
    outcome.removed = sorted(set(outcome.removed) - set(outcome.remaining))
    return outcome


def _slot_streams(selection: Selection) -> list[str]:
    """The streams behind the slot buckets (ENV-6) of runs left with no generation."""
    kept = {run.run_id for run in selection.keep}
    gone = {run.run_id: run for run in selection.remove if run.run_id not in kept}
    return [f"KV_{gone[run_id].names.slot_bucket()}" for run_id in sorted(gone)]


async def _exists(js: JetStreamContext, stream: str) -> bool:
    try:
        await js.stream_info(stream)
    except NotFoundError:
        return False
    return True
