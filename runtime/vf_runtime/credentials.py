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

# The durable broker's own route credentials (its servers' pods only).
NATS_ROUTE_USER_ENV: Final = "VF_NATS_ROUTE_USER"
NATS_ROUTE_PASSWORD_ENV: Final = "VF_NATS_ROUTE_PASSWORD"

# The shipped broker's one account: the flow's user, with JetStream, and nothing else.
NATS_ACCOUNT: Final = "FLOW"


def store_key_prefix(flow_id: str) -> str:
    """Every key a flow writes in its payload store starts with this."""
    return f"vf:{flow_id}:"


def store_acl_rule(flow_id: str) -> str:
    """The ACL rule (after the user's name, ``on`` and its password) that confines a flow's
    store user to its own keys and the commands vf's workers send."""
    categories = "+@read +@write +@keyspace +@scripting +@transaction +@connection"
    return f"~{store_key_prefix(flow_id)}* resetchannels -@all {categories}"
