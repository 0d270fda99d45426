"""Workers forked from one process that has already imported them, instead of fresh
interpreters: ``vf run-local`` starts ten workers in the time one takes to import.

``python -m vf_runtime.local.zygote FD MODULE`` imports ``MODULE`` (the worker,
``vf_runtime.worker.replica``) and then serves requests on the Unix socket ``FD``. Each
request carries a worker's whole environment and the write end of the pipe that is to
be its standard output and error. The zygote forks; the child closes everything of the
zygote's (its socket, its wake-up pipe, its SIGCHLD handler), makes the pipe its fds 1
and 2, replaces its environment, and runs ``MODULE`` as ``__main__`` exactly as
``python -m MODULE`` would, then exits through the interpreter's normal shutdown. It
joins the zygote's process group, which is the one a fresh worker would have joined.

The zygote answers each request with the child's pid, reports its exit status once it
has reaped it, and signals it on request (only while it is unreaped, so never a reused
pid). It exits when vf's end of the socket closes, whether vf stopped or died; its
children then see their parent change and stop, as a worker does when vf is gone.

A child must start as a fresh interpreter would, so the zygote serves only environments
that agree with its own on what an interpreter reads while it starts (``PYTHON*``,
locale, loader and allocator variables): the caller starts fresh processes otherwise.
The zygote holds no thread and no event loop when it forks.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import runpy
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import Any, TextIO

WORKER_MODULE = "vf_runtime.worker.replica"
READY_TIMEOUT = 60.0
LOST = -signal.SIGKILL  # the exit reported for a child whose zygote vanished before it
_HEADER = struct.Struct(">I")
_STARTUP_PREFIXES = ("PYTHON", "LC_", "LD_", "MALLOC_", "GLIBC_")
_STARTUP_NAMES = frozenset({"LANG", "LANGUAGE", "TZ"})


def startup_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The variables an interpreter (or the C library under it) reads when it starts."""
    return {
        key: value
        for key, value in env.items()
        if key.startswith(_STARTUP_PREFIXES) or key in _STARTUP_NAMES
    }


def _send(sock: socket.socket, message: Mapping[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    socket.send_fds(sock, [_HEADER.pack(len(data)) + data], fds or [])


def _recv_exact(sock: socket.socket, size: int, fds: list[int]) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk, got, _, _ = socket.recv_fds(sock, size - len(data), 4)
        fds.extend(got)
        if not chunk:
            return None
        data += chunk
    return data


def _recv(sock: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    """One message and the fds sent with it; None once the other end has closed."""
    fds: list[int] = []
    header = _recv_exact(sock, _HEADER.size, fds)
    body = None if header is None else _recv_exact(sock, _HEADER.unpack(header)[0], fds)
    if body is None:
        for fd in fds:
            os.close(fd)
        return None
    message: dict[str, Any] = json.loads(body)
    return message, fds


# --- the zygote process -------------------------------------------------------------------


class _Serving:
    """The zygote's state: its socket, wake-up pipe and unreaped children (id by pid)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        self.children: dict[int, int] = {}

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            ident = self.children.pop(pid, None)
            if ident is not None:
                _send(self.sock, {"id": ident, "exit": os.waitstatus_to_exitcode(status)})

    def signal(self, ident: int, signum: int) -> None:
        for pid, child in self.children.items():
            if child == ident:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)

    def fork(self, ident: int, fds: list[int]) -> bool:
        """Fork a child for request ``ident``; True in the child, which is then set up."""
        try:
            pid = os.fork()
        except OSError:  # no process to be had (a limit): a replica that failed to start
            _send(self.sock, {"id": ident, "exit": 1})
            return False
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.close(self.wake_r)
            os.close(self.wake_w)
            self.sock.close()
            os.dup2(fds[0], 1)
            os.dup2(fds[0], 2)
            return True
        self.children[pid] = ident
        _send(self.sock, {"id": ident, "pid": pid})
        return False


def serve(sock: socket.socket) -> dict[str, str] | None:
    """Answer requests until vf's end closes (None); in a forked child, its environment."""
    serving = _Serving(sock)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(serving.wake_w, warn_on_full_buffer=False)
    _send(sock, {"ready": True})
    while True:
        ready: list[int] = []
        with contextlib.suppress(InterruptedError):
            ready, _, _ = select.select([sock.fileno(), serving.wake_r], [], [])
        if serving.wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(serving.wake_r, 512)
        serving.reap()
        if sock.fileno() not in ready:
            continue
        received = _recv(sock)
        if received is None:
            return None
        message, fds = received
        try:
            if "signal" in message:
                serving.signal(int(message["id"]), int(message["signal"]))
            elif serving.fork(int(message["id"]), fds):
                env: dict[str, str] = message["env"]
                return env
        finally:
            for fd in fds:
                os.close(fd)


def main() -> int:
    """``python -m vf_runtime.local.zygote FD MODULE``: import MODULE, then fork it on demand."""
    sock = socket.socket(fileno=int(sys.argv[1]))
    module = sys.argv[2]
    __import__(module)  # a failure is printed where vf prints, and vf starts fresh workers
    quiet = os.open(os.devnull, os.O_WRONLY)  # not holding vf's output open (``| head``)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    os.close(quiet)
    try:
        env = serve(sock)
    except (BrokenPipeError, ConnectionResetError):  # vf is gone: so are its requests
        return 0
    if env is None:
        return 0
    os.environ.clear()
    os.environ.update(env)
    sys.argv = [""]  # as ``python -m MODULE`` has it, once runpy has set argv[0]
    del sys.modules[module]  # its imports stay loaded; it runs once more, as __main__
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


# --- vf's end -----------------------------------------------------------------------------


class ForkedWorker:
    """A worker the zygote forked, handled like a ``subprocess.Popen`` of it."""

    def __init__(self, zygote: Zygote, ident: int, stdout: TextIO) -> None:
        self.zygote = zygote
        self.ident = ident
        self.stdout = stdout
        self.pid: int | None = None
        self.returncode: int | None = None
        self.exited = threading.Event()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self.exited.wait(timeout):
            raise subprocess.TimeoutExpired("forked worker", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            self.zygote.send({"id": self.ident, "signal": int(signum)})

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def ended(self, code: int) -> None:
        self.returncode = code
        self.exited.set()


class Zygote:
    """vf's end of a running zygote: it forks workers of ``module`` for ``environment``s
    that agree with its own on the variables read at start-up."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        sock: socket.socket,
        env: Mapping[str, str],
        module: str,
    ) -> None:
        self.process = process
        self.sock = sock
        self.module = module
        self.startup = startup_variables(env)
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.workers: dict[int, ForkedWorker] = {}
        self.ready = threading.Event()
        self.gone = False
        self.reader: threading.Thread | None = None

    def listen(self) -> None:
        """Read the zygote's messages (ready, each worker's pid and exit) on a thread of
        vf's from now on. vf calls it once it has forked what it forks itself (the graph
        loader): a process forks only while it runs one thread (ADR 0170). Until then the
        messages wait in the socket."""
        if self.reader is None:
            self.reader = threading.Thread(target=self._read, name="vf-zygote", daemon=True)
            self.reader.start()

    @classmethod
    def start(
        cls, env: Mapping[str, str], *, group: int | None, module: str = WORKER_MODULE
    ) -> Zygote:
        """Start a zygote with ``env`` (in process group ``group``; None: a session of its own)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with theirs:
            process = subprocess.Popen(
                [sys.executable, "-m", "vf_runtime.local.zygote", str(theirs.fileno()), module],
                env=dict(env),
                pass_fds=[theirs.fileno()],
                start_new_session=group is None,
                process_group=group,
            )
        return cls(process, sock=ours, env=env, module=module)

    def serves(self, command: tuple[str, ...], env: Mapping[str, str]) -> bool:
        """Whether a fork of this zygote is what ``command`` with ``env`` would start."""
        return (
            command == (sys.executable, "-m", self.module)
            and startup_variables(env) == self.startup
            and not self.gone
        )

    def spawn(self, env: Mapping[str, str]) -> ForkedWorker | None:
        """Fork a worker with ``env``; None when the zygote did not start or is gone."""
        self.listen()
        if not self.ready.wait(READY_TIMEOUT) or self.gone:
            return None
        read_end, write_end = os.pipe()
        stdout = open(read_end, errors="replace")  # noqa: SIM115 - the worker's to close
        with self.lock:
            worker = ForkedWorker(self, next(self.ids), stdout)
            self.workers[worker.ident] = worker
            try:
                _send(self.sock, {"id": worker.ident, "env": dict(env)}, [write_end])
            except OSError:
                del self.workers[worker.ident]
                stdout.close()
                return None
            finally:
                os.close(write_end)
        return worker

    def send(self, message: Mapping[str, Any]) -> None:
        with self.lock, contextlib.suppress(OSError):
            _send(self.sock, message)

    def _read(self) -> None:
        while True:
            try:
                received = _recv(self.sock)
            except OSError:
                received = None
            if received is None:
                break
            message, fds = received
            for fd in fds:
                os.close(fd)
            if message.get("ready"):
                self.ready.set()
            worker = self.workers.get(int(message.get("id", 0)))
            if worker is not None and "pid" in message:
                worker.pid = int(message["pid"])
            if worker is not None and "exit" in message:
                with self.lock:
                    self.workers.pop(worker.ident, None)
                worker.ended(int(message["exit"]))
        with self.lock:
            self.gone = True
            left, self.workers = list(self.workers.values()), {}
        self.ready.set()
        for worker in left:
            worker.ended(LOST)

    def close(self, timeout: float = 10.0) -> None:
        """Close vf's end (the zygote then exits) and wait for the zygote."""
        if not self.ready.is_set():  # still importing, and nothing to fork: not worth waiting
            with contextlib.suppress(OSError):
                self.process.terminate()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


if __name__ == "__main__":
    sys.exit(main())
