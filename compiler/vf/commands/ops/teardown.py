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

    @property
    def live(self) -> list[RunState]:
        return [run for run in self.remove if run.live_readers]


@dataclass(kw_only=True)
class Outcome:
    """What a teardown removed and what, asked again afterwards, is still there."""

    removed: list[str] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)


def tree_runs(tree: Path, flow_id: str) -> set[tuple[str, str]]:
    """``(run, generation)`` of every environment of ``tree`` that deploys ``flow_id``."""
    plans = sorted((tree / "plan").glob("*.json")) if (tree / "plan").is_dir() else []
    if not plans:
        raise VfError(
            "VF_TEARDOWN_TREE",
            f"{tree} holds no plan/<env>.json, so the runs it deploys are unknown",
            "pass the directory vf compile --out wrote (the committed tree)",
            str(tree),
        )
    runs = set()
    for path in plans:
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
        if plan.get("flow_id") == flow_id:
            runs.add((str(plan.get("run_id", "")), str(plan.get("generation") or "")))
    return runs


def select_run(runs: list[RunState], which: Selector) -> Selection:
    """The runs ``which`` selects: every generation of its run (or only its generation)."""
    chosen = [r for r in runs if which.selects(run=r.run_id, generation=r.generation)]
    return Selection(remove=tuple(chosen), keep=tuple(r for r in runs if r not in chosen))


def select_superseded(runs: list[RunState], deployed: set[tuple[str, str]] | None) -> Selection:
    """Every run but those ``deployed``; without a tree, every run but the newest."""
    if deployed is None:
        deployed = {runs[-1].key} if runs else set()
    keep = [r for r in runs if r.key in deployed]
    return Selection(remove=tuple(r for r in runs if r.key not in deployed), keep=tuple(keep))


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
