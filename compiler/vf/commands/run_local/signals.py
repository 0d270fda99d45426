"""How vf run-local stops: the signals that end a run the way Ctrl-C does, and the run's
guardian, which ends whatever the run started even when vf itself is killed."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from vf.errors import EnvironmentProblem
from vf_runtime.local.guardian import Guardian


def start_guardian() -> Guardian:
    """The run's guardian, started; it makes the run directory while vf compiles."""
    try:
        return Guardian.launch()
    except OSError as exc:
        raise _no_guardian(exc) from exc


def guarded(guardian: Guardian) -> None:
    """Wait for the guardian to have made the run directory."""
    try:
        guardian.directory  # noqa: B018 - reads the guardian's first line
    except (OSError, RuntimeError) as exc:
        raise _no_guardian(exc) from exc


def _no_guardian(exc: Exception) -> EnvironmentProblem:
    return EnvironmentProblem(
        "VF_LOCAL_INFRA",
        f"cannot start the run's guardian: {exc}",
        "check that the temporary directory is writable (TMPDIR)",
    )


_SIGNALLED: list[int] = []  # the signals that asked this run to stop
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """Stop the run as Ctrl-C does, and remember it: Python only prints a KeyboardInterrupt
    raised inside a finalizer or a weakref callback (an import's lock clean-up is one), and
    the run must still stop. A list append takes no lock, so no handler can wait on one."""
    _SIGNALLED.append(signum)
    raise KeyboardInterrupt


def stop_asked() -> bool:
    return bool(_SIGNALLED)


def stop_if_asked() -> None:
    """Raise the interrupt a swallowed signal did not, at a step between two of the run's."""
    if _SIGNALLED:
        raise KeyboardInterrupt


@contextmanager
def stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (a CI cancel, ``timeout``, a closed terminal) stop the run the
    way Ctrl-C does: workers in order, then the servers, then the run directory."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _SIGNALLED.clear()
    with _handled_by(_interrupt):
        yield


@contextmanager
def cancelled_by_signals(task: asyncio.Task[None]) -> Iterator[None]:
    """While the block runs, a stop signal cancels ``task`` at its next ``await`` (as
    ``asyncio.run`` does on Ctrl-C) instead of raising at whatever instruction the event
    loop is at. The signal is remembered as it arrives, not when the loop next looks: one
    that lands as the task ends is never lost, and :func:`stop_if_asked` raises it after."""
    loop = task.get_loop()

    def _cancel(signum: int, frame: FrameType | None) -> None:
        _SIGNALLED.append(signum)
        loop.call_soon_threadsafe(task.cancel)  # wakes a loop asleep in select()

    with _handled_by(_cancel):
        yield


@contextmanager
def _handled_by(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    """Every stop signal goes to ``handler`` while the block runs; then to what it went to."""
    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, kept in previous.items():
            signal.signal(sig, kept)
