"""Physical names: Kubernetes (DNS-1123) names derived from logical ones.

Broker names (streams, subjects, durables) have one implementation, shared with the
workers: ``vf_runtime.broker.naming``.

Every Kubernetes name comes from here so that two logical names can never silently
share one physical name: normalised or truncated names carry a short hash of the
logical name, and the planner refuses the collisions that remain.
"""

from __future__ import annotations

import hashlib
import re

K8S_NAME_MAX = 63
HASH_LEN = 6
_K8S_INVALID = re.compile(r"[^a-z0-9-]+")
_K8S_VALID = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
NODE_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,126}[A-Za-z0-9])?\Z")
FLOW_ID = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\Z")  # any label value
RUN_ID = re.compile(r"^[a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?\Z")
# An OCI image reference: registry[:port]/path[:tag][@sha256:digest], lowercase path.
IMAGE_REF = re.compile(
    r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]{1,2}[a-z0-9]+|-+[a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?\Z"
)
IMAGE_REF_MAX = 512
# A message field to partition on: printable, no spaces or quotes, one env variable's value.
PARTITION_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,252}\Z")


def short_hash(text: str, length: int = HASH_LEN) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def slug(text: str) -> str:
    """Lowercase DNS-1123 label characters only, dashes collapsed, no hash."""
    return _K8S_INVALID.sub("-", text.lower()).strip("-")


def k8s_name(*parts: str, limit: int = K8S_NAME_MAX) -> str:
    """A DNS-1123 name for ``parts`` joined by dashes.

    Returned unchanged when already valid and short enough; otherwise normalised,
    truncated to leave room, and suffixed with a hash of the logical name.
    """
    logical = "-".join(parts)
    if len(logical) <= limit and _K8S_VALID.fullmatch(logical):
        return logical  # what ``slug`` leaves unchanged, found by one match
    normal = slug(logical)
    if normal == logical and len(normal) <= limit:
        return normal  # the empty name
    head = normal[: limit - HASH_LEN - 1].rstrip("-")
    return f"{head}-{short_hash(logical)}" if head else short_hash(logical)


def label_value(text: str) -> str:
    """A label value: like a name, at most 63 characters."""
    return k8s_name(text)


def default_node_name(class_name: str) -> str:
    """The default name of a node whose class occurs once: ``FrameReader`` → ``frame-reader``."""
    return slug(_CAMEL.sub("-", class_name)) or "node"
