"""The flow's broker and store credentials in its clients' pods (ADR 0212): Secret
references for the workers and the provision Job, never the values."""

from __future__ import annotations

from pathlib import PurePosixPath

from vf.ir.plan import Infra
from vf.ir.records import SecretRef
from vf.render.tls import client_ca_env, client_ca_mounts, client_ca_volumes
from vf.textio.objects import Obj
from vf_runtime.credentials import (
    NATS_CREDS_ENV,
    NATS_PASSWORD_ENV,
    NATS_TOKEN_ENV,
    NATS_USER_ENV,
    STORE_PASSWORD_ENV,
    STORE_USER_ENV,
)

# an external broker's .creds file, where every client of the flow reads it
CREDS_VOLUME = "vf-nats-creds"
NATS_CREDS_PATH = "/etc/vf/nats/nats.creds"


def client_credentials(infra: Infra) -> list[tuple[str, SecretRef]]:
    """Each credential variable a client of the flow's broker and store reads, and the
    Secret key it comes from (a ``.creds`` file is mounted instead: ``_credential_files``)."""
    out: list[tuple[str, SecretRef]] = []
    broker, store = infra.broker_auth, infra.store_auth
    if broker.secret is not None and broker.kind == "password":
        out += [
            (NATS_USER_ENV, SecretRef(name=broker.secret, key="user")),
            (NATS_PASSWORD_ENV, SecretRef(name=broker.secret, key="password")),
        ]
    elif broker.secret is not None and broker.kind == "token":
        out.append((NATS_TOKEN_ENV, SecretRef(name=broker.secret, key="token")))
    if store is not None and store.secret is not None:
        out += [
            (STORE_USER_ENV, SecretRef(name=store.secret, key="user")),
            (STORE_PASSWORD_ENV, SecretRef(name=store.secret, key="password")),
        ]
    return out


def creds_file_env(infra: Infra) -> list[Obj]:
    """``VF_NATS_CREDS``: where a client finds an external broker's ``.creds`` file; and
    where it finds the CA of a broker or store that speaks TLS (ADR 0222)."""
    creds = [{"name": NATS_CREDS_ENV, "value": NATS_CREDS_PATH}] if _creds_volumes(infra) else []
    return creds + client_ca_env(infra)


def _creds_volumes(infra: Infra) -> list[Obj]:
    auth = infra.broker_auth
    if auth.kind != "creds" or auth.secret is None:
        return []
    items = [{"key": "creds", "path": PurePosixPath(NATS_CREDS_PATH).name}]
    return [{"name": CREDS_VOLUME, "secret": {"secretName": auth.secret, "items": items}}]


def credential_volumes(infra: Infra) -> list[Obj]:
    """An external broker's ``.creds`` file, from its Secret's key ``creds``, and the CA
    of each service that speaks TLS."""
    return _creds_volumes(infra) + client_ca_volumes(infra)


def credential_mounts(infra: Infra) -> list[Obj]:
    """The ``.creds`` file's folder and the CAs' in a client's container, read-only."""
    found = []
    if _creds_volumes(infra):
        folder = str(PurePosixPath(NATS_CREDS_PATH).parent)
        found.append({"name": CREDS_VOLUME, "mountPath": folder, "readOnly": True})
    return found + client_ca_mounts(infra)
