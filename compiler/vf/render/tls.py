"""TLS on the flow's broker and store connections (ADR 0222): the servers vf runs read their
certificate from a Secret mounted in their pods, and every client of the flow (workers, the
provision Job) trusts the Secret's ``ca.crt``, mounted read-only, its path in
``VF_NATS_TLS_CA`` / ``VF_BLOB_REDIS_TLS_CA``.

The Secret's keys are cert-manager's: ``tls.crt``, ``tls.key`` and ``ca.crt``. An external
service's Secret needs ``ca.crt`` only: the CA its clients trust.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from vf.ir.plan import Infra, ServiceTls
from vf.textio.objects import Obj
from vf_runtime.credentials import NATS_TLS_CA_ENV, STORE_TLS_CA_ENV

CERT, KEY, CA = "tls.crt", "tls.key", "ca.crt"
# where a server vf runs finds its certificate (beside, not inside, its configuration)
NATS_TLS_DIR = "/etc/nats-tls"
STORE_TLS_DIR = "/etc/valkey-tls"
SERVER_VOLUME = "tls"
# where a client finds the CA it trusts, one folder per service
CLIENT_CA = {"nats": "/etc/vf/tls/nats", "redis": "/etc/vf/tls/redis"}
CLIENT_VOLUME = {"nats": "vf-nats-tls-ca", "redis": "vf-redis-tls-ca"}


def nats_tls_block(indent: str, where: str = NATS_TLS_DIR) -> list[str]:
    """A ``tls { ... }`` block of nats.conf: the server's certificate, its key and the CA
    (for the cluster block, the CA every route's peer must be signed by), in the folder
    ``where`` (the pod's mounted Secret; a local run's own files for ``vf run-local``)."""
    folder = PurePosixPath(where)
    return [
        f"{indent}tls {{",
        f'{indent}  cert_file: "{folder / CERT}"',
        f'{indent}  key_file: "{folder / KEY}"',
        f'{indent}  ca_file: "{folder / CA}"',
        f"{indent}}}",
    ]


def store_tls_args(where: str = STORE_TLS_DIR, *, port: int = 6379) -> list[str]:
    """valkey-server's TLS arguments: TLS alone on ``port`` (plain port 0), the certificate,
    its key and CA in the folder ``where``, and no client certificate asked (clients log in
    by ACL password)."""
    folder = PurePosixPath(where)
    return [
        "--port",
        "0",
        "--tls-port",
        str(port),
        "--tls-cert-file",
        str(folder / CERT),
        "--tls-key-file",
        str(folder / KEY),
        "--tls-ca-cert-file",
        str(folder / CA),
        "--tls-auth-clients",
        "no",
    ]


def mount_server_tls(pod: Obj, tls: ServiceTls | None, *, folder: str) -> None:
    """Mount the server's TLS Secret read-only at ``folder`` in its pod's first container
    (nothing without TLS: the shipped shape stays as it is)."""
    if tls is None:
        return
    items = [{"key": k, "path": k} for k in (CERT, KEY, CA)]
    pod.setdefault("volumes", []).append(
        {"name": SERVER_VOLUME, "secret": {"secretName": tls.secret, "items": items}}
    )
    pod["containers"][0].setdefault("volumeMounts", []).append(
        {"name": SERVER_VOLUME, "mountPath": folder, "readOnly": True}
    )


def _client_tls(infra: Infra) -> list[tuple[str, ServiceTls, str]]:
    found = [("nats", infra.broker_tls, NATS_TLS_CA_ENV)]
    if infra.store_profile != "none":
        found.append(("redis", infra.store_tls, STORE_TLS_CA_ENV))
    return [(service, tls, var) for service, tls, var in found if tls is not None]


def client_ca_env(infra: Infra) -> list[Obj]:
    """``VF_NATS_TLS_CA`` / ``VF_BLOB_REDIS_TLS_CA``: where a client finds the CA it trusts."""
    return [
        {"name": var, "value": str(PurePosixPath(CLIENT_CA[service]) / CA)}
        for service, _tls, var in _client_tls(infra)
    ]


def client_ca_volumes(infra: Infra) -> list[Obj]:
    """The ``ca.crt`` of each TLS Secret, alone (a client never sees the server's key)."""
    return [
        {
            "name": CLIENT_VOLUME[service],
            "secret": {"secretName": tls.secret, "items": [{"key": CA, "path": CA}]},
        }
        for service, tls, _var in _client_tls(infra)
    ]


def client_ca_mounts(infra: Infra) -> list[Obj]:
    return [
        {"name": CLIENT_VOLUME[service], "mountPath": CLIENT_CA[service], "readOnly": True}
        for service, _tls, _var in _client_tls(infra)
    ]
