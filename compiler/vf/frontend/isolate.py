"""Run the user's graph code in a child process that vf can bound and judge.

The graph module is imported, its factory called and the Flow lowered to the Graph IR in
a forked child; only the IR (plain frozen data) comes back. The child cannot harm the
compile: its standard output is standard error (``print`` and ``os.write(1, …)`` never
reach ``vf plan``'s JSON), it ends with ``os._exit`` once the IR is sent (threads it left
running do not keep vf alive), and the parent holds a deadline of its own, so a graph
that disarms the in-process watchdog (``signal.signal(SIGALRM, SIG_IGN)``) is killed,
and one that exits early (``os._exit(0)``) is a named error, never a silent success.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import select
import signal
import struct
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# Both sides of the fork need it (and hashlib): imported once, before the fork.
import vf.frontend.graph_checks  # noqa: F401
from vf.errors import VfError
from vf.frontend.load import split_target
from vf.frontend.watchdog import TIMEOUT_ENV, load_timeout
from vf.ir.graph import Graph

IN_PROCESS_ENV = "VF_LOAD_IN_PROCESS"
GRACE_SECONDS = 5.0
_HEADER = struct.Struct("!I")


def load_graph(target: str) -> tuple[Graph, Path]:
    """The lowered graph of ``target`` and the module's path, built in a child process
    where the platform can fork (``VF_LOAD_IN_PROCESS=1`` builds it in this process)."""
    with graph_loader(target) as loaded:
        return loaded()


@contextlib.contextmanager
def graph_loader(target: str) -> Iterator[Callable[[], tuple[Graph, Path]]]:
    """Start building ``target``'s graph at once and yield the call that waits for it, so
    the caller can work meanwhile (``vf compile`` imports its later stages while the child
    runs the user's code); a child still running when the block ends is stopped."""
    if not hasattr(os, "fork") or os.environ.get(IN_PROCESS_ENV, "") not in ("", "0"):
        yield lambda: _build(target)
        return
    timeout = load_timeout()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child never returns from here
        os.close(read_end)
        _child(target, write_end)
    os.close(write_end)
    deadline = _deadline(timeout)

    def loaded() -> tuple[Graph, Path]:
        reply = _receive(read_end, pid=pid, deadline=deadline)
        return _outcome(reply, target=target, timeout=timeout)

    try:
        yield loaded
    finally:
        os.close(read_end)
        _reap(pid)


def _build(target: str) -> tuple[Graph, Path]:
    from vf.frontend.load import load_flow
    from vf.frontend.lower import lower

    flow, path = load_flow(target)
    return lower(flow, source_stem=path.stem), path


def _deadline(timeout: float) -> float | None:
    return time.monotonic() + timeout + GRACE_SECONDS if timeout > 0 else None


class _Relay:
    """The child's ``sys.stdout`` and ``sys.stderr``: text sent to vf, which shows it on
    its standard error as it comes."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, text: str) -> int:
        _send(self.fd, ("text", str(text)))
        return len(text)

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return False


def _child(target: str, fd: int) -> None:
    # As in the compile that waits for it: no cycle collector (the child ends once it sent
    # the IR), whether or not the parent had paused its own before it forked.
    gc.disable()
    try:
        os.dup2(2, 1)  # fd 1 is vf's output: the user's raw writes go to standard error
        relay = _Relay(fd)
        sys.stdout = sys.stderr = relay
        try:
            _send(fd, ("graph", _build(target)))
        except VfError as error:
            _send(fd, ("error", (type(error), error.problems)))
        except KeyboardInterrupt:
            _send(fd, ("interrupt", None))
        except BaseException as exc:
            _send(fd, ("bug", f"{type(exc).__name__}: {exc}"))
    finally:
        os._exit(0)


def _send(fd: int, message: tuple[str, Any]) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _receive(fd: int, *, pid: int, deadline: float | None) -> tuple[str, Any] | None:
    """The child's result; its text is shown on the way. None: it ended without one."""
    buffer = bytearray()
    try:
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return ("timeout", None)
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            buffer += chunk
            while len(buffer) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(buffer)
                if len(buffer) < _HEADER.size + size:
                    break
                kind, body = pickle.loads(bytes(buffer[_HEADER.size : _HEADER.size + size]))
                del buffer[: _HEADER.size + size]
                if kind != "text":
                    return (kind, body)
                sys.stderr.write(body)
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        raise


def _reap(pid: int) -> None:
    """End the child (it has sent all it will) and collect it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _outcome(reply: tuple[str, Any] | None, *, target: str, timeout: float) -> tuple[Graph, Path]:
    where = str(split_target(target)[0])
    if reply is None:
        raise VfError(
            "VF_LOAD_EXIT",
            "the graph module ended vf's loading process (os._exit, a signal or a crash) "
            "before its factory returned a Flow",
            "graph modules must not end the process; guard scripts with if __name__ == '__main__'",
            where,
        )
    kind, body = reply
    if kind == "graph":
        graph, path = body
        return graph, path
    if kind == "error":
        cls, problems = body
        raise cls.collect(problems)
    if kind == "interrupt":
        raise KeyboardInterrupt
    if kind == "timeout":
        raise VfError(
            "VF_LOAD_TIMEOUT",
            f"loading the graph and building its Flow took longer than {timeout:g} s "
            f"({TIMEOUT_ENV}), and the module kept vf's own time limit from stopping it",
            "do not change SIGALRM or timers in a graph module; keep slow work in open()",
            where,
        )
    raise RuntimeError(f"loading the graph failed inside vf: {body}")
