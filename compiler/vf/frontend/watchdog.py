"""A deadline for the user's graph code: importing the module and building the Flow.

On the main thread a ``SIGALRM`` timer interrupts the user's code wherever it is, even in
``time.sleep`` or a blocking read; on any other thread a timer thread raises the
interruption asynchronously in the loading thread, which takes effect at the next Python
instruction. Either way the interruption is a ``BaseException`` so that the user's
``except Exception`` cannot swallow it, and a user who swallows it anyway is still stopped
by ``check`` once their code returns. Code stuck inside one long C call cannot be
interrupted until that call returns.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from vf.errors import VfError

TIMEOUT_ENV = "VF_LOAD_TIMEOUT_SECONDS"
DEFAULT_TIMEOUT_SECONDS = 60.0


class LoadTimeout(BaseException):
    """Raised inside the user's code when the deadline passes."""


def load_timeout() -> float:
    """Seconds the graph may take to load (``VF_LOAD_TIMEOUT_SECONDS``); 0 means no limit."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise VfError(
            "VF_LOAD_TIMEOUT_SETTING",
            f"{TIMEOUT_ENV}={raw[:40]!r} is not a number of seconds",
            f"set {TIMEOUT_ENV} to a positive number, or 0 to wait without a limit",
            TIMEOUT_ENV,
        )
    return seconds


class Watchdog:
    """The armed deadline of one load; ``fired`` once the deadline has passed."""

    def __init__(self, seconds: float, path: Path) -> None:
        self.seconds = seconds
        self.path = path
        self.fired = False

    def error(self, where: str) -> VfError:
        return VfError(
            "VF_LOAD_TIMEOUT",
            f"loading {self.path.name} and building its Flow took longer than "
            f"{self.seconds:g} s ({TIMEOUT_ENV})",
            "keep slow work (models, data, network) out of module import and build_flow(); "
            f"do it in the node's open(), or raise {TIMEOUT_ENV}",
            where,
        )

    def check(self, where: str) -> None:
        """Raise the timeout error when the deadline passed, even if the user caught it."""
        if self.fired:
            raise self.error(where)


@contextlib.contextmanager
def watchdog(seconds: float, path: Path) -> Iterator[Watchdog]:
    """Arm a deadline of ``seconds`` (none when 0) around the block.

    An interruption that lands outside the user's code (just as it returns) still ends
    the load with the timeout error, never with a stray exception.
    """
    guard = Watchdog(seconds, path)
    try:
        if seconds <= 0:
            yield guard
        elif threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
            with _alarm(guard):
                yield guard
        else:
            with _async_interrupt(guard):
                yield guard
    except LoadTimeout:
        raise guard.error(str(path)) from None


@contextlib.contextmanager
def _alarm(guard: Watchdog) -> Iterator[None]:
    def interrupt(signum: int, frame: object) -> None:
        guard.fired = True
        raise LoadTimeout

    previous = signal.signal(signal.SIGALRM, interrupt)
    began = time.monotonic()
    delay, interval = signal.setitimer(signal.ITIMER_REAL, guard.seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if delay > 0:  # someone else's timer was running: give back what is left of it
            left = delay - (time.monotonic() - began)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001), interval)


@contextlib.contextmanager
def _async_interrupt(guard: Watchdog) -> Iterator[None]:
    import ctypes  # only a load off the main thread needs it

    target = ctypes.c_ulong(threading.get_ident())
    lock = threading.Lock()
    armed = True

    def interrupt() -> None:
        with lock:
            if armed:
                guard.fired = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, ctypes.py_object(LoadTimeout))

    timer = threading.Timer(guard.seconds, interrupt)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            armed = False
            if guard.fired:  # not delivered yet: it must not surface after the block
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, None)
        timer.cancel()
