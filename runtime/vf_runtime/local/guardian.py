"""What a local run starts dies with it, however the run ends.

``vf run-local`` starts a guardian before anything else: a small process leading a
process group of its own, in vf's session. Every server and worker the run starts
joins that group when it is forked, so nothing can be started outside it. The guardian
creates the run directory, prints its path, and then only waits for its standard input
to end. That happens when vf closes the pipe after a normal stop, and equally when vf
is killed outright (SIGKILL included), because the kernel closes a dead process's pipes.
Then the guardian terminates every other member of its group, kills what is left after
a grace period, removes the run directory and exits.

The group is not the terminal's foreground group, so a Ctrl-C reaches vf alone and vf
can still stop its workers in order before the guardian has anything to do.

A caller whose processes need groups of their own (``vf run-tree``: each container is
signalled as a group, as a kubelet does) instead tells the guardian each new group's id
on the pipe (``adopt``); those groups are ended the same way. A SIGKILL landing between
such a fork and its ``adopt`` is the one moment this cannot cover.

What lives outside any process group of the run (a container, which podman's monitor
keeps running after the ``podman run`` that started it is gone) is ended by a command the
caller registers (``on_close``): the guardian runs each such command once the groups are
ended, before it removes the run directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

GRACE_SECONDS = 5.0
CLOSE_TIMEOUT = 20.0
CLEANUP_TIMEOUT = 60.0
_POLL = 0.05


@dataclass
class Guardian:
    """vf's end of a running guardian: its process group and the run directory it holds."""

    process: subprocess.Popen[bytes]
    made: Path | None = None  # the run directory, once the guardian has said it

    @classmethod
    def start(cls, prefix: str = "vf-run-") -> Guardian:
        """Start the guardian; it has created the run directory (``prefix…``) on return."""
        guardian = cls.launch(prefix)
        guardian.directory  # noqa: B018 - waits for the guardian to have made it
        return guardian

    @classmethod
    def launch(cls, prefix: str = "vf-run-") -> Guardian:
        """Start the guardian without waiting for it: its group exists on return, so other
        processes may join it at once; ``directory`` waits for the run directory."""
        process = subprocess.Popen(
            [sys.executable, "-m", "vf_runtime.local.guardian", prefix],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            process_group=0,
        )
        return cls(process=process)

    @property
    def directory(self) -> Path:
        """The run directory; raise RuntimeError if the guardian could not make it."""
        if self.made is None:
            assert self.process.stdout is not None
            line = self.process.stdout.readline().decode().strip()
            if not line:
                self.process.wait()
                raise RuntimeError(
                    f"the run's guardian did not start (exit {self.process.returncode})"
                )
            self.made = Path(line)
        return self.made

    @property
    def group(self) -> int:
        """The process group every process of the run joins."""
        return self.process.pid

    def adopt(self, group: int) -> None:
        """Have the guardian end process group ``group`` too (one with a session of its own)."""
        self._tell(f"+{group}")

    def release(self, group: int) -> None:
        """``group``'s leader has exited and been waited for: its id may be reused, forget it."""
        self._tell(f"-{group}")

    def on_close(self, command: list[str]) -> None:
        """Have the guardian run ``command`` when the run ends, after the groups are ended."""
        self._tell("!" + json.dumps(command))

    def _tell(self, line: str) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self.process.stdin.write(f"{line}\n".encode())
                self.process.stdin.flush()

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Let the guardian end whatever is left, remove the run directory, and wait for it."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.group, signal.SIGKILL)
            self.process.wait()


def members(group: int) -> list[int]:
    """The live processes of ``group`` other than this one (zombies are already gone)."""
    me = os.getpid()
    if Path("/proc/self/stat").exists():
        found = []
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and int(entry.name) != me and _group_of(entry.name) == group:
                found.append(int(entry.name))
        return found
    listing = subprocess.run(
        ["ps", "-A", "-o", "pid=,pgid=,stat="], capture_output=True, text=True, check=False
    ).stdout
    rows = (line.split() for line in listing.splitlines() if line.strip())
    return [
        int(row[0])
        for row in rows
        if len(row) == 3 and int(row[1]) == group and int(row[0]) != me and row[2][0] != "Z"
    ]


def _group_of(pid: str) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces; then state, ppid, pgrp
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 3 or fields[0] == "Z":
        return None
    return int(fields[2])


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _members_of(groups: list[int]) -> list[int]:
    return [pid for group in groups for pid in members(group)]


def _wait_gone(groups: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    left = _members_of(groups)
    while left and time.monotonic() < deadline:
        time.sleep(_POLL)
        left = _members_of(groups)
    return left


def reap(groups: list[int], grace: float = GRACE_SECONDS) -> None:
    """Terminate every other member of ``groups``; kill the ones that outlive ``grace``."""
    left = _members_of(groups)
    if not left:
        return
    _signal_all(left, signal.SIGTERM)
    left = _wait_gone(groups, grace)
    if left:
        _signal_all(left, signal.SIGKILL)
        _wait_gone(groups, grace)


def _read_adopted() -> tuple[list[int], list[list[str]]]:
    """The groups adopted (``+id``) and not released (``-id``) when standard input ends,
    and the cleanup commands registered (``!["argv", ...]``)."""
    groups: set[int] = set()
    commands: list[list[str]] = []
    pending = b""
    while chunk := os.read(0, 65536):
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if line[1:].isdigit():
                (groups.add if line[:1] == b"+" else groups.discard)(int(line[1:]))
            elif line[:1] == b"!":
                with contextlib.suppress(ValueError):
                    command = json.loads(line[1:])
                    if isinstance(command, list) and command not in commands:
                        commands.append([str(part) for part in command])
    return sorted(groups), commands


def _clean_up(commands: list[list[str]]) -> None:
    for command in commands:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=CLEANUP_TIMEOUT,
                check=False,
            )


def main() -> int:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # only the end of vf's pipe ends the guardian
    directory = tempfile.mkdtemp(prefix=sys.argv[1] if len(sys.argv) > 1 else "vf-run-")
    adopted: list[int] = []
    commands: list[list[str]] = []
    try:
        with contextlib.suppress(OSError):  # vf may be gone before it read the path
            os.write(1, (directory + "\n").encode())
            adopted, commands = _read_adopted()
        reap([os.getpgrp(), *adopted])
        _clean_up(commands)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
