"""Physical names: Kubernetes (DNS-1123) names derived from logical ones.

Broker names (streams, subjects, durables) have one implementation, shared with the
workers: ``vf_runtime.broker.naming``.

Every Kubernetes name comes from here so that two logical names can never silently
share one physical name: normalised or shortened names carry a short hash of the
logical name, and the planner refuses the collisions that remain.

A name too long to fit is shortened where it says least (ADR 0209): the parts a flow's
objects share (the flow id, the run id) give up characters first, then the part that
tells the objects apart (the node's name) loses letters from its longest words, never
a whole word, so two nodes that differ in a middle word keep different, readable names.
"""

from __future__ import annotations

import hashlib
import re

K8S_NAME_MAX = 63
HASH_LEN = 6
PART_FLOOR = 8  # a shared part (flow id, run id) keeps at least this many characters
SUFFIX_MAX = 3  # a last part this short (hl, pdb, a shard number) follows the key part
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
    shortened to leave room (``_shorten``), and suffixed with a hash of the logical name.
    """
    logical = "-".join(parts)
    if len(logical) <= limit and _K8S_VALID.fullmatch(logical):
        return logical  # what ``slug`` leaves unchanged, found by one match
    normal = slug(logical)
    if normal == logical and len(normal) <= limit:
        return normal  # the empty name
    room = limit - HASH_LEN - 1
    head = normal if len(normal) <= room else _shorten([slug(p) for p in parts], room)
    return f"{head}-{short_hash(logical)}" if head else short_hash(logical)


def _shorten(parts: list[str], room: int) -> str:
    """``parts`` joined in at most ``room`` characters, cut where they say least.

    The key part is the last one longer than ``SUFFIX_MAX`` characters: a node's name, or
    what an object of the flow is (``provision``, ``nats``); the short suffixes after it
    (``hl``, ``pdb``, a shard number) stay whole. The parts before it (``vf``, the flow
    id, the run id) are cut first, first to last, down to ``PART_FLOOR`` characters each;
    then the key part's longest words; what still does not fit is cut at the end.
    """
    parts = [p for p in parts if p]
    if not parts or room <= 0:
        return ""
    long = [i for i, p in enumerate(parts) if len(p) > SUFFIX_MAX]
    key = long[-1] if long else len(parts) - 1

    def excess() -> int:
        return sum(map(len, parts)) + len(parts) - 1 - room

    for i in range(key):
        if excess() <= 0:
            break
        keep = max(PART_FLOOR, len(parts[i]) - excess())
        parts[i] = parts[i][:keep].rstrip("-")
    if excess() > 0:
        parts[key] = _abbreviate(parts[key], len(parts[key]) - excess())
    return "-".join(parts)[:room].rstrip("-")


def _abbreviate(text: str, length: int) -> str:
    """``text``'s dash-separated words cut to fit ``length``: the longest first, each to
    the same length (the first ones a letter more where room is left), so every word
    keeps its beginning. Too many words for that: the first ``length`` characters."""
    words = text.split("-")
    caps = range(max(map(len, words)), 0, -1)
    fit = (c for c in caps if sum(min(len(w), c) for w in words) + len(words) - 1 <= length)
    cap = next(fit, 0)
    if not cap:
        return text[: max(length, 0)].rstrip("-")
    spare = length - (sum(min(len(w), cap) for w in words) + len(words) - 1)
    out = []
    for word in words:
        extra = 1 if spare > 0 and len(word) > cap else 0
        spare -= extra
        out.append(word[: cap + extra])
    return "-".join(out)


def label_value(text: str) -> str:
    """A label value: like a name, at most 63 characters."""
    return k8s_name(text)


def default_node_name(class_name: str) -> str:
    """The default name of a node whose class occurs once: ``FrameReader`` → ``frame-reader``."""
    return slug(_CAMEL.sub("-", class_name)) or "node"
