"""A throw-away certificate authority and server certificate for one run (ADR 0222).

``vf run-local`` and ``vf run-tree`` meet TLS as a cluster would (ADR 0226, 0230): the
servers they start present a certificate that a fresh CA signed for this run, and every
client trusts that CA only. The files are made with the ``openssl`` command line (the
``cryptography`` package is not a dependency of vf) and hold the keys cert-manager's
Secrets hold: ``tls.crt``, ``tls.key`` and ``ca.crt``.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from vf_runtime.local.infra import MissingTool

CERT_DAYS = 2  # a run's certificates: long enough for any run, useless after it
KEY = "rsa:2048"


@dataclass(frozen=True)
class TlsFiles:
    """The three files of a TLS Secret, by its keys' names."""

    cert: Path  # tls.crt
    key: Path  # tls.key
    ca: Path  # ca.crt

    def secret_data(self) -> dict[str, str]:
        """The Secret's keys and values, as a ``kubernetes.io/tls`` Secret with its CA."""
        return {
            "tls.crt": self.cert.read_text(encoding="ascii"),
            "tls.key": self.key.read_text(encoding="ascii"),
            "ca.crt": self.ca.read_text(encoding="ascii"),
        }


def _openssl() -> str:
    found = shutil.which("openssl")
    if found is None:
        raise MissingTool(
            "TLS for a local run needs the openssl command: `apt-get install openssl` "
            "(or your system's package) so that it is on PATH"
        )
    return found


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"openssl failed ({' '.join(argv[1:3])}): {done.stderr.strip()}")


def _alt_names(names: list[str]) -> str:
    entries = []
    for name in names:
        try:
            ipaddress.ip_address(name)
            entries.append(f"IP:{name}")
        except ValueError:
            entries.append(f"DNS:{name}")
    return ",".join(entries)


def make_tls(folder: Path, *, names: list[str]) -> TlsFiles:
    """A new CA and a certificate it signs for ``names`` (host names, ``*.`` wildcards or IP
    addresses), usable by a server and, for the broker's routes, by a client; written 0600
    under ``folder``."""
    openssl = _openssl()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    ca_key, ca = folder / "ca.key", folder / "ca.crt"
    key, cert, request = folder / "tls.key", folder / "tls.crt", folder / "tls.csr"
    days = str(CERT_DAYS)
    _run(
        [openssl, "req", "-x509", "-newkey", KEY, "-nodes", "-keyout", str(ca_key), "-out",
         str(ca), "-days", days, "-subj", "/CN=vf run CA",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"]
    )  # fmt: skip
    _run(
        [openssl, "req", "-newkey", KEY, "-nodes", "-keyout", str(key), "-out", str(request),
         "-subj", f"/CN={names[0]}"]
    )  # fmt: skip
    extensions = folder / "tls.ext"
    extensions.write_text(
        f"subjectAltName={_alt_names(names)}\n"
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth,clientAuth\n",
        encoding="ascii",
    )
    _run(
        [openssl, "x509", "-req", "-in", str(request), "-CA", str(ca), "-CAkey", str(ca_key),
         "-CAcreateserial", "-out", str(cert), "-days", days, "-extfile", str(extensions)]
    )  # fmt: skip
    for path in folder.iterdir():
        path.chmod(0o600)
    return TlsFiles(cert=cert, key=key, ca=ca)
