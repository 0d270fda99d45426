"""The credential Secrets run-tree creates for a run, as the operator would (ADR 0212).

A tree names the Secrets of its broker's and store's credentials and never holds them; the
tree's README tells the operator the command that creates each. run-tree plays that part
for the servers vf runs: it makes up a user and a random password for each such Secret that
``--secrets`` does not give, for this run only. They live in memory and in the pods' own
environment under the run directory, never beside the tree.

A server's TLS Secret (ADR 0222) is made up the same way (ADR 0226): a fresh CA signs a
certificate for this run alone, for the names a pod here reaches the server by (run-tree
rewrites a Service's names to the loopback address), and the three files' text is kept in
memory; the folder ``make_tls`` wrote them in is removed at once.
"""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path

from vf.errors import EnvironmentProblem
from vf.textio.objects import Obj
from vf_runtime.local.infra import MissingTool
from vf_runtime.local.tls import make_tls

PASSWORD_BYTES = 24  # hex, as the README's `openssl rand -hex 24`: a route URL holds it
# what a pod's rewritten URL names (the loopback address) and the name the tests' clients use
LOCAL_NAMES = ("127.0.0.1", "localhost")


def server_secrets(plan: Obj) -> list[str]:
    """The credential Secrets of the broker and store vf runs (not an external one's: only
    its owner knows them), as the plan names them."""
    infra = plan.get("infra") or {}
    names: list[str] = []
    for profile, auth in (
        (infra.get("broker_profile"), infra.get("broker_auth")),
        (infra.get("store_profile"), infra.get("store_auth")),
    ):
        if profile in (None, "none", "external") or not isinstance(auth, dict):
            continue
        names += [str(auth[k]) for k in ("secret", "routes_secret") if auth.get(k)]
    return names


def run_credentials(
    plan: Obj, *, given: Mapping[str, Mapping[str, str]]
) -> dict[str, dict[str, str]]:
    """A made-up ``{user, password}`` for each server credential Secret ``given`` (the
    tree's and ``--secrets``') lacks; fresh for every call."""
    return {
        name: {"user": name, "password": secrets.token_hex(PASSWORD_BYTES)}
        for name in server_secrets(plan)
        if name not in given
    }


def server_tls(plan: Obj) -> dict[str, list[str]]:
    """The TLS Secrets of the broker and store vf runs, each with the names its certificate
    needs here: the loopback address pods connect to, and the Services' own names."""
    infra = plan.get("infra") or {}
    found: dict[str, list[str]] = {}
    for role in ("broker", "store"):
        tls, profile = infra.get(f"{role}_tls"), infra.get(f"{role}_profile")
        if profile in (None, "none", "external") or not isinstance(tls, dict):
            continue
        name = str(infra.get(f"{role}_name") or role)
        names = found.setdefault(str(tls["secret"]), list(LOCAL_NAMES))
        names += [n for n in (name, f"*.{name}-headless") if n not in names]
    return found


def run_tls(plan: Obj, *, given: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    """``tls.crt``, ``tls.key`` and ``ca.crt`` for each server TLS Secret ``given`` lacks,
    signed by a CA made for this call alone."""
    made: dict[str, dict[str, str]] = {}
    for secret, names in server_tls(plan).items():
        if secret in given:
            continue
        with tempfile.TemporaryDirectory(prefix="vf-run-tls-") as folder:
            try:
                made[secret] = make_tls(Path(folder) / "tls", names=names).secret_data()
            except (MissingTool, RuntimeError) as exc:
                raise EnvironmentProblem(
                    "VF_RUN_TREE_TOOL",
                    f"cannot make the certificate of TLS Secret {secret!r} for this run: {exc}",
                    f"install openssl, or pass the Secret's tls.crt, tls.key and ca.crt in "
                    f"--secrets as `{secret}: {{tls.crt: ..., tls.key: ..., ca.crt: ...}}`",
                ) from exc
    return made
