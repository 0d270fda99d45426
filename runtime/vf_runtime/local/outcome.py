"""How a run on this machine ends: what it dead-lettered, and the exit code that says so.

``vf run-local`` and ``vf run-tree`` both end here, so one flow that loses work ends with
the same code under either runner: 0 only when every item went through and the dead
letters were read back and there were none, 3 when they could not be read, 4 a node was
lost (its restarts, or its Job's ``backoffLimit``, ran out), 5 no progress (or not done in
time), 6 items were dead-lettered (end-of-stream mismatches among them: they are kept
there too), 7 a BATCH flow was stopped before its work was done, 8 a node ended on an abort
from upstream (its reason is among the dead letters), 9 it finished, but a producer not
declared replayable restarted with an idempotent consumer downstream (its new life re-emitted
items under new ids, which that consumer applied again: MSGID-5), 130 interrupted.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

from vf_runtime.broker.naming import RunNames, token
from vf_runtime.clientauth import NatsAuth
from vf_runtime.local.deadletters import DeadLetterReport, read_dead_letters, write_dead_letters

EXIT_OK = 0
EXIT_ENVIRONMENT = 3
EXIT_LOST = 4
EXIT_STALLED = 5
EXIT_DEAD_LETTERS = 6
EXIT_STOPPED = 7
EXIT_ABORTED = 8
EXIT_REPLAYED = 9
EXIT_INTERRUPTED = 130
EXIT_CODES = {
    "ok": EXIT_OK,
    "unverified": EXIT_ENVIRONMENT,
    "lost": EXIT_LOST,
    "stalled": EXIT_STALLED,
    "dead-lettered": EXIT_DEAD_LETTERS,
    "stopped": EXIT_STOPPED,
    "aborted": EXIT_ABORTED,
    "replayed": EXIT_REPLAYED,
    "interrupted": EXIT_INTERRUPTED,
}


def settled(
    status: str, letters: DeadLetterReport | None, *, replayed: tuple[str, ...] = ()
) -> str:
    """The run's final status: an ``ok`` run whose dead letters are unknown is
    ``unverified`` (never read as none), one that has some is ``dead-lettered``, and one
    where a producer of ``replayed`` restarted (:func:`replayed_producers`) is ``replayed``."""
    if status != "ok":
        return status
    if letters is None:
        return "unverified"
    if letters.total:
        return "dead-lettered"
    return "replayed" if replayed else "ok"


def replayed_producers(
    unreplayable: Sequence[str], restarts: Mapping[str, int], *, out: TextIO
) -> tuple[str, ...]:
    """The producers of ``unreplayable`` (the plan's ``unreplayable_producers``) that
    restarted, by ``restarts`` per node, each said on ``out`` in a warning: every new life
    re-emitted its items under new ids (MSGID-3), past the idempotent consumers' records."""
    replayed = tuple(p for p in unreplayable if restarts.get(p, 0) > 0)
    for producer in replayed:
        out.write(
            f"[vf] warning[VF_PRODUCER_NOT_REPLAYABLE] producer {producer} restarted "
            f"{restarts[producer]} time(s) and is not declared replayable: its items were "
            "re-emitted under new ids, and its idempotent consumers may have applied some "
            "twice; set `replayable = True` on a producer that re-emits the same items\n"
        )
    return replayed


def exit_code(status: str) -> int:
    """The exit code of a final status (an unknown one is never a success)."""
    return EXIT_CODES.get(status, EXIT_DEAD_LETTERS)


def report_dead_letters(
    url: str,
    names: RunNames,
    nodes: tuple[str, ...],
    *,
    out: TextIO,
    kept: str,
    copy_dir: Path | None = None,
    auth: NatsAuth | None = None,
) -> DeadLetterReport | None:
    """Read ``names``' dead letters, print per node how many and the first reasons, the
    stream and subjects (``kept`` says whether they outlive the run's broker), and keep a
    JSON-lines copy in ``copy_dir`` (default: the temporary directory). None: unreadable."""
    try:
        report = asyncio.run(read_dead_letters(url, names, nodes, auth=auth))
    except Exception as exc:  # the run's outcome stands; say the DLQ was not read
        out.write(f"[vf] could not read the dead letters: {exc}\n")
        return None
    if not report.total:
        return report
    for node in report.nodes:
        out.write(f"[vf] {node.node}: {node.count} item(s) dead-lettered; first reasons:\n")
        for reason in node.reasons:
            out.write(f"[vf]     {reason}\n")
    folder = copy_dir if copy_dir is not None else Path(tempfile.gettempdir())
    copy = folder / f"vf-dead-letters-{token(names.flow_id)}-{names.generation}.jsonl"
    write_dead_letters(report, copy)
    where = f"stream {names.dlq_stream()}, subjects {names.dlq_run_subjects()}"
    out.write(f"[vf] dead letters: {where} ({kept}); a copy is kept in {copy}\n")
    return report
