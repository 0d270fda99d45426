"""Whether a service URL written in vf.yaml carries a secret.

A plain ``url:`` lands in a ConfigMap, the plan and the chart, so it must not hold a
user name, a password or a token. Clients decode percent escapes before they read a URL
(redis-py turns ``?pass%77ord=x`` into a password), so the check decodes first, until
nothing changes, and refuses every query key a client could take a credential from.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote

# Query keys (and parts of keys) that name a credential in a NATS or Redis client URL.
_SECRET_KEYS = ("pass", "pwd", "token", "user", "auth", "secret", "cred", "jwt", "seed", "nkey")
_MAX_DECODES = 8


def decoded(text: str) -> str:
    """``text`` with percent escapes decoded, repeatedly, until it no longer changes."""
    for _ in range(_MAX_DECODES):
        plain = unquote(text)
        if plain == text:
            break
        text = plain
    return text


def _secret_key(key: str) -> bool:
    name = decoded(key).strip().lower().replace("-", "").replace("_", "")
    return any(part in name for part in _SECRET_KEYS) or name in {"key", "apikey"}


def url_credentials(url: str) -> bool:
    """Whether ``url`` (one or more comma-separated servers) carries a user, password or token."""
    for server in url.split(","):
        raw = server.strip()
        rest = raw.split("://", 1)[-1]
        authority = rest.split("/", 1)[0].split("?", 1)[0]
        if "@" in authority or "@" in decoded(authority):
            return True
        query = rest.split("?", 1)[1] if "?" in rest else ""
        pairs = parse_qsl(query.split("#", 1)[0], keep_blank_values=True)
        if any(_secret_key(key) for key, _ in pairs):
            return True
        if any(_secret_key(part.split("=", 1)[0]) for part in query.split(";")):
            return True
    return False
