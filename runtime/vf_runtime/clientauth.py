"""The credentials vf's own clients present to the broker and the payload store.

Every NATS client vf makes (a worker, the provision Job, ``vf`` operator commands, ``vf
run-local``) reads one form of credentials from its environment (the names are in
:mod:`vf_runtime.credentials`): ``VF_NATS_USER`` with ``VF_NATS_PASSWORD``, or
``VF_NATS_TOKEN``, or ``VF_NATS_CREDS`` (the path of a ``.creds`` file); none of them is an
anonymous client. The store client reads ``VF_BLOB_REDIS_USER``/``VF_BLOB_REDIS_PASSWORD``.
``VF_NATS_TLS_CA`` and ``VF_BLOB_REDIS_TLS_CA`` name the CA (a PEM file) a client trusts
for a server that speaks TLS (ADR 0222).

The values never reach a log line: the classes here show which form is set, never a value.
"""

from __future__ import annotations

import importlib.util
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from vf_runtime.credentials import (
    NATS_CREDS_ENV,
    NATS_PASSWORD_ENV,
    NATS_TLS_CA_ENV,
    NATS_TOKEN_ENV,
    NATS_USER_ENV,
    STORE_PASSWORD_ENV,
    STORE_TLS_CA_ENV,
    STORE_USER_ENV,
)


class CredentialsError(Exception):
    """The environment's credentials cannot be used as they are: a named error with a fix."""

    def __init__(self, code: str, message: str, fix: str) -> None:
        super().__init__(message)
        self.code = code
        self.fix = fix

    def render(self) -> str:
        return f"error[{self.code}] {self}\n  = fix: {self.fix}"


@dataclass(frozen=True)
class NatsAuth:
    """One form of NATS client credentials, or none (an anonymous client)."""

    user: str = field(default="", repr=False)
    password: str = field(default="", repr=False)
    token: str = field(default="", repr=False)
    creds: str = ""  # a path, not a secret
    ca: str = ""  # the CA file the client trusts for TLS (ADR 0222); empty: the system's

    @property
    def form(self) -> str:
        """``user``, ``token``, ``creds`` or ``none``: what a message may say of them."""
        if self.user:
            return "user"
        if self.token:
            return "token"
        return "creds" if self.creds else "none"

    def options(self) -> dict[str, Any]:
        """nats-py's ``connect`` keyword arguments for these credentials (and, with a CA,
        the TLS context that trusts it: nats-py upgrades when the server asks TLS)."""
        found: dict[str, Any] = {"tls": tls_context(self.ca)} if self.ca else {}
        if self.user:
            return found | {"user": self.user, "password": self.password}
        if self.token:
            return found | {"token": self.token}
        if self.creds:
            return found | {"user_credentials": self.creds}
        return found

    def env(self) -> dict[str, str]:
        """The environment variables that carry these credentials to another process."""
        found = {NATS_TLS_CA_ENV: self.ca} if self.ca else {}
        if self.user:
            return found | {NATS_USER_ENV: self.user, NATS_PASSWORD_ENV: self.password}
        if self.token:
            return found | {NATS_TOKEN_ENV: self.token}
        return found | ({NATS_CREDS_ENV: self.creds} if self.creds else {})

    def described(self) -> str:
        """How the client authenticates, for an error message (never a value)."""
        return {
            "user": f"as user {self.user!r} ({NATS_USER_ENV}/{NATS_PASSWORD_ENV})",
            "token": f"with the token in {NATS_TOKEN_ENV}",
            "creds": f"with the credentials file {self.creds} ({NATS_CREDS_ENV})",
            "none": f"without credentials (none of {NATS_USER_ENV}, {NATS_TOKEN_ENV}, "
            f"{NATS_CREDS_ENV} is set)",
        }[self.form]


def nats_auth(env: Mapping[str, str] | None = None) -> NatsAuth:
    """The NATS credentials ``env`` (the process environment by default) holds.

    Raises :class:`CredentialsError` (``VF_BROKER_CREDENTIALS``) for more than one form, a
    user without a password (or the reverse), or a ``.creds`` file that cannot be read.
    """
    env = os.environ if env is None else env
    user, password = env.get(NATS_USER_ENV, ""), env.get(NATS_PASSWORD_ENV, "")
    token, creds = env.get(NATS_TOKEN_ENV, ""), env.get(NATS_CREDS_ENV, "")
    forms = [
        name
        for name, present in (
            (f"{NATS_USER_ENV}/{NATS_PASSWORD_ENV}", user or password),
            (NATS_TOKEN_ENV, token),
            (NATS_CREDS_ENV, creds),
        )
        if present
    ]
    fix = (
        "set exactly one form: the user and its password, or a token, or a .creds file's "
        "path; unset the others"
    )
    if len(forms) > 1:
        raise CredentialsError(
            "VF_BROKER_CREDENTIALS",
            f"more than one form of NATS credentials is set: {', '.join(forms)}",
            fix,
        )
    if bool(user) != bool(password):
        have, missing = (
            (NATS_USER_ENV, NATS_PASSWORD_ENV) if user else (NATS_PASSWORD_ENV, NATS_USER_ENV)
        )
        raise CredentialsError(
            "VF_BROKER_CREDENTIALS", f"{have} is set but {missing} is empty or unset", fix
        )
    if creds:
        _check_creds_file(creds)
    ca = _ca_file(env, NATS_TLS_CA_ENV, "VF_BROKER_CREDENTIALS")
    return NatsAuth(user=user, password=password, token=token, creds=creds, ca=ca)


def tls_context(ca: str) -> ssl.SSLContext:
    """A client's TLS context that trusts the CA in the PEM file ``ca`` (and checks the
    server's name against its certificate)."""
    return ssl.create_default_context(cafile=ca)


def _ca_file(env: Mapping[str, str], var: str, code: str) -> str:
    """The CA file ``var`` names, checked now: a client retries a TLS failure as an outage."""
    path = env.get(var, "")
    if not path:
        return ""
    try:
        tls_context(path)
    except (OSError, ssl.SSLError) as exc:
        raise CredentialsError(
            code,
            f"{var}={path} is not a readable PEM CA certificate: {exc}",
            "mount the TLS Secret's ca.crt at that path (a Secret volume), or correct the path",
        ) from exc
    return path


def _check_creds_file(path: str) -> None:
    """nats-py reads the file on every connection attempt and retries a failure forever:
    a missing file or a missing ``nkeys`` package is said once, here."""
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise CredentialsError(
            "VF_BROKER_CREDENTIALS",
            f"{NATS_CREDS_ENV}={path} cannot be read: {exc.strerror or exc}",
            "mount the .creds file at that path (a Secret volume), or correct the path",
        ) from exc
    if importlib.util.find_spec("nkeys") is None:  # nats-py signs the server's nonce with it
        raise CredentialsError(
            "VF_BROKER_CREDENTIALS",
            f"{NATS_CREDS_ENV} is set but the nkeys package, which signs with a .creds "
            "file, is not installed",
            "install it beside vf (`pip install nkeys`), or use a user and password",
        )


@dataclass(frozen=True)
class StoreAuth:
    """The payload store's user and password, or none (the URL's, or the default user)."""

    user: str = field(default="", repr=False)
    password: str = field(default="", repr=False)
    ca: str = ""  # the CA file the client trusts for a ``rediss://`` store (ADR 0222)

    def options(self, url: str = "") -> dict[str, Any]:
        """redis-py's ``username``/``password`` keyword arguments (empty: none set), and for
        a ``rediss://`` ``url`` the CA it trusts."""
        found: dict[str, Any] = {}
        if self.ca and url.startswith("rediss://"):
            found["ssl_ca_certs"] = self.ca
        if self.user:
            found["username"] = self.user
        if self.password:
            found["password"] = self.password
        return found

    def env(self) -> dict[str, str]:
        found = {STORE_TLS_CA_ENV: self.ca} if self.ca else {}
        if self.user:
            found[STORE_USER_ENV] = self.user
        if self.password:
            found[STORE_PASSWORD_ENV] = self.password
        return found


def store_auth(env: Mapping[str, str] | None = None) -> StoreAuth:
    """The store credentials ``env`` (the process environment by default) holds.

    A password alone authenticates the store's default user (``requirepass``); a user
    without a password is :class:`CredentialsError` (``VF_STORE_CREDENTIALS``).
    """
    env = os.environ if env is None else env
    user, password = env.get(STORE_USER_ENV, ""), env.get(STORE_PASSWORD_ENV, "")
    if user and not password:
        raise CredentialsError(
            "VF_STORE_CREDENTIALS",
            f"{STORE_USER_ENV} is set but {STORE_PASSWORD_ENV} is empty or unset",
            f"set {STORE_PASSWORD_ENV} from the same Secret as the user",
        )
    ca = _ca_file(env, STORE_TLS_CA_ENV, "VF_STORE_CREDENTIALS")
    return StoreAuth(user=user, password=password, ca=ca)
