"""The names a flow's broker and store credentials travel under.

The compiler renders them (Secret references in the workers', the provision Job's and the
servers' pods; the shipped servers' configuration) and the worker reads them, so both take
them from here. The values themselves never pass through vf's tree: they live in Secrets
the operator creates (ADR 0212).
"""

from typing import Final

# A worker's, the provision Job's and an operator command's client credentials.
NATS_USER_ENV: Final = "VF_NATS_USER"
NATS_PASSWORD_ENV: Final = "VF_NATS_PASSWORD"
NATS_TOKEN_ENV: Final = "VF_NATS_TOKEN"
NATS_CREDS_ENV: Final = "VF_NATS_CREDS"  # the path of a mounted .creds file
STORE_USER_ENV: Final = "VF_BLOB_REDIS_USER"
STORE_PASSWORD_ENV: Final = "VF_BLOB_REDIS_PASSWORD"
# The CA a client trusts for a broker or store that speaks TLS (a PEM file's path, ADR 0222).
NATS_TLS_CA_ENV: Final = "VF_NATS_TLS_CA"
STORE_TLS_CA_ENV: Final = "VF_BLOB_REDIS_TLS_CA"

# The durable broker's own route credentials (its servers' pods only).
NATS_ROUTE_USER_ENV: Final = "VF_NATS_ROUTE_USER"
NATS_ROUTE_PASSWORD_ENV: Final = "VF_NATS_ROUTE_PASSWORD"

# The shipped broker's one account: the flow's user, with JetStream, and nothing else.
NATS_ACCOUNT: Final = "FLOW"


def store_key_prefix(flow_id: str) -> str:
    """Every key a flow writes in its payload store starts with this."""
    return f"vf:{flow_id}:"


# The commands vf's store clients send, and nothing else: a blob's transaction (MULTI, SET,
# SADD, EXPIRE, EXEC; DISCARD when it fails), its read (GET), its release script (EVALSHA,
# SCRIPT LOAD once per server; the script calls SREM, SCARD and UNLINK, which ACL checks as
# well), an idempotency record (EXISTS, SET), the operator commands' PING, GET and EXISTS,
# and the client's own hello (CLIENT SETINFO, SELECT of the URL's database). No category is
# granted whole: @keyspace or @write would bring FLUSHALL and FLUSHDB, which take no key.
STORE_COMMANDS: Final = (
    "ping",
    "select",
    "client|setinfo",
    "get",
    "set",
    "exists",
    "sadd",
    "srem",
    "scard",
    "expire",
    "unlink",
    "multi",
    "exec",
    "discard",
    "evalsha",
    "script|load",
)


def store_acl_rule(flow_id: str) -> str:
    """The ACL rule (after the user's name, ``on`` and its password) that confines a flow's
    store user to its own keys and the commands vf's workers send."""
    commands = " ".join(f"+{name}" for name in STORE_COMMANDS)
    return f"resetkeys ~{store_key_prefix(flow_id)}* resetchannels -@all {commands}"
