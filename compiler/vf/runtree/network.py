"""Loopback networking for emulated pods: ports, Service proxies and DNS-name rewriting.

Every pod gets its own loopback port for each port its containers listen on. A Service
becomes a TCP proxy on a port of its own that forwards each connection to one *ready*
endpoint (round robin), as kube-proxy does; a headless Service's per-pod names point at
the pod's own ports. Pods reach them through the names they would use in a cluster
(``svc``, ``svc.ns``, ``svc.ns.svc``, ``svc.ns.svc.cluster.local``, and
``pod.svc`` for headless Services), rewritten to ``127.0.0.1:PORT`` in their environment,
arguments and mounted configuration files.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from vf_runtime.local.infra import free_port

LOOPBACK = "127.0.0.1"
CLUSTER_DOMAIN = "cluster.local"


def dns_names(name: str, namespace: str, *, under: str | None = None) -> list[str]:
    """The names a pod in ``namespace`` may use for a Service (or a pod ``under`` one)."""
    stem = name if under is None else f"{name}.{under}"
    return [
        f"{stem}.{namespace}.svc.{CLUSTER_DOMAIN}",
        f"{stem}.{namespace}.svc",
        f"{stem}.{namespace}",
        stem,
    ]


@dataclass
class AddressBook:
    """(host, port) → loopback port, for every name pods of one namespace may use."""

    entries: dict[tuple[str, int], int] = field(default_factory=dict)
    _pattern: re.Pattern[str] | None = None

    def add(self, names: list[str], port: int, local: int) -> None:
        for name in names:
            self.entries[(name, port)] = local
        self._pattern = None

    def rewrite(self, text: str) -> str:
        """Replace every ``host:port`` the book knows with ``127.0.0.1:local``."""
        if not self.entries or ":" not in text:
            return text
        if self._pattern is None:
            alternatives = sorted({f"{h}:{p}" for h, p in self.entries}, key=len, reverse=True)
            self._pattern = re.compile(
                r"(?<![\w.-])(" + "|".join(re.escape(a) for a in alternatives) + r")(?![\w])"
            )
        lookup = {f"{h}:{p}": v for (h, p), v in self.entries.items()}
        return self._pattern.sub(lambda m: f"{LOOPBACK}:{lookup[m.group(1)]}", text)


Endpoints = Callable[[], list[int]]


class ServiceProxies:
    """TCP proxies, one per Service port, run on one event loop in a background thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self._servers: dict[int, asyncio.AbstractServer] = {}

    def open(self, endpoints: Endpoints) -> int:
        """Listen on a new loopback port; forward connections to ``endpoints()``."""
        port = free_port()
        turn = itertools.count()

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            ready = endpoints()
            if not ready:
                writer.close()
                return
            target = ready[next(turn) % len(ready)]
            try:
                up_reader, up_writer = await asyncio.open_connection(LOOPBACK, target)
            except OSError:
                writer.close()
                return
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

        async def start() -> asyncio.AbstractServer:
            return await asyncio.start_server(handle, LOOPBACK, port)

        server = asyncio.run_coroutine_threadsafe(start(), self.loop).result(timeout=10)
        self._servers[port] = server
        return port

    def close(self, port: int) -> None:
        server = self._servers.pop(port, None)
        if server is not None:
            self.loop.call_soon_threadsafe(server.close)

    def shutdown(self) -> None:
        for port in list(self._servers):
            self.close(port)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


def env_links(
    services: Mapping[str, list[tuple[str | None, int, int]]],
) -> Iterator[tuple[str, str]]:
    """The Docker-link variables the kubelet gives every pod for each Service it can see."""
    for name, ports in sorted(services.items()):
        if not ports:
            continue
        stem = name.upper().replace("-", "_")
        first = ports[0]
        yield f"{stem}_SERVICE_HOST", LOOPBACK
        yield f"{stem}_SERVICE_PORT", str(first[2])
        yield f"{stem}_PORT", f"tcp://{LOOPBACK}:{first[2]}"
        for port_name, port, local in ports:
            if port_name:
                yield f"{stem}_SERVICE_PORT_{port_name.upper().replace('-', '_')}", str(local)
            prefix = f"{stem}_PORT_{port}_TCP"
            yield prefix, f"tcp://{LOOPBACK}:{local}"
            yield f"{prefix}_PROTO", "tcp"
            yield f"{prefix}_PORT", str(local)
            yield f"{prefix}_ADDR", LOOPBACK
