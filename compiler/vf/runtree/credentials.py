"""The credential Secrets run-tree creates for a run, as the operator would (ADR 0212).

A tree names the Secrets of its broker's and store's credentials and never holds them; the
tree's README tells the operator the command that creates each. run-tree plays that part
for the servers vf runs: it makes up a user and a random password for each such Secret that
``--secrets`` does not give, for this run only. They live in memory and in the pods' own
environment under the run directory, never beside the tree.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from vf.textio.objects import Obj

PASSWORD_BYTES = 24  # hex, as the README's `openssl rand -hex 24`: a route URL holds it


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
