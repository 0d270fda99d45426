"""What a change does to who delivers each node of an environment (ADRs 220, 225, 238,
246, 249, 256, 258): the environment's own Application or Kustomization (its overlay), or a
shard's.

A node whose owner changes has its objects moved from one Application (Kustomization) to
another, and whether the cluster keeps them depends on the direction and the controller
(docs/gitops.md): growing past the threshold keeps them under both; going back below it
keeps them under both where the new tree retires the old shards (a compile over the
committed tree, ``shards/<env>/retired/``), else deletes and creates them again; so does
a change of the shard count, which numbers every shard anew (ADR 258). The report says
so before the commit lands, with the number of nodes that move.

A node's shard is read from the committed files themselves (the ``vf.dev/node`` label of
each file under ``shards/<env>/<nn>/``), so a tree an earlier vf wrote is read as it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from vf.commands.diff.plan import INFO, WARNING, Finding
from vf.emit.retired import README, retired_dir
from vf.emit.shards import SHARDS_DIR
from vf_runtime.labels import NODE_LABEL

_NODE = re.compile(rf"^\s+{re.escape(NODE_LABEL)}: (.+)$", re.MULTILINE)
_OVERLAY = "overlay"
_NAMED = 5  # moved nodes named in a finding


def _value(text: str) -> str:
    """A label value as YAML writes it on one line (plain, or quoted where ambiguous)."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def node_owners(tree: Mapping[str, str], *, env: str) -> dict[str, str] | None:
    """Each node of ``env`` and the shard whose folder holds it; None when ``env`` is
    not delivered in shards (a retired shard's folder holds no node)."""
    prefix = f"{SHARDS_DIR}/{env}/"
    found: dict[str, str] = {}
    sharded = False
    for rel, text in tree.items():
        if not rel.startswith(prefix) or rel.startswith(f"{retired_dir(env)}/"):
            continue
        sharded = True
        match = _NODE.search(text)
        if match is not None:
            found[_value(match.group(1))] = rel[len(prefix) :].split("/", 1)[0]
    return found if sharded else None


def _named(nodes: list[str]) -> str:
    shown = ", ".join(nodes[:_NAMED])
    return shown + (f" and {len(nodes) - _NAMED} more" if len(nodes) > _NAMED else "")


def _shrunk(env: str, *, count: str, retired: bool) -> Finding:
    """Going back below the threshold: kept where the new tree retires the old shards."""
    moved = f"no longer delivered in shards: {count} move back to the environment's "
    if retired:
        message = moved + (
            "Application or Kustomization; each shard's stays, retired, and deletes none of "
            "them, so both controllers keep them running (ADR 256); under Argo CD what this "
            "commit also removes stays, listed as requiring pruning"
        )
        return Finding(category="delivery", subject=env, message=message, severity=INFO)
    message = moved + (
        "Application or Kustomization, and deleting each shard's deletes them first: "
        "a BATCH flow's Jobs run again and Deployments restart (docs/gitops.md); "
        "commit this between runs"
    )
    return Finding(category="delivery", subject=env, message=message, severity=WARNING)


def shard_findings(
    env: str, *, committed: Mapping[str, str], fresh: Mapping[str, str], nodes: list[str]
) -> list[Finding]:
    """What moving ``nodes`` (the environment's nodes in both trees) between owners does."""
    before, after = node_owners(committed, env=env), node_owners(fresh, env=env)
    if before is None and after is None:
        return []
    old = {n: (before or {}).get(n, _OVERLAY) for n in nodes}
    new = {n: (after or {}).get(n, _OVERLAY) for n in nodes}
    moved = sorted(n for n in nodes if old[n] != new[n])
    if not moved:
        return []
    count = f"{len(moved)} node{'s' if len(moved) != 1 else ''} ({_named(moved)})"
    retired = f"{retired_dir(env)}/{README}" in fresh  # the old shards' objects stay
    if before is None:
        shards = len(set((after or {}).values()))
        message = (
            f"delivered in shards from this commit ({shards} with nodes): {count} move from "
            "the environment's Application or Kustomization to a shard's, which both "
            "controllers keep running (ADRs 225, 238); under Argo CD what this commit also "
            "removes stays, listed as requiring pruning"
        )
        return [Finding(category="delivery", subject=env, message=message)]
    if after is None:
        return [_shrunk(env, count=count, retired=retired)]
    return [_reshard(env, before=before, after=after, moved=moved, count=count, retired=retired)]


def _reshard(
    env: str,
    *,
    before: Mapping[str, str],
    after: Mapping[str, str],
    moved: list[str],
    count: str,
    retired: bool,
) -> Finding:
    """Nodes that move between shards: kept where their old shards are retired."""
    counts = f"{len(set(before.values()))} to {len(set(after.values()))} shards with nodes"
    head = f"{count} move to another shard ({counts}): "
    if {before[n] for n in moved} & set(after.values()):  # numbered as by a vf before ADR 258
        message = head + (
            "a shard that keeps its number but loses nodes prunes them before the new shard "
            "applies them, so their objects are deleted and created again: a BATCH flow's "
            "Jobs run again and Deployments restart (ADR 258); commit this between runs"
        )
        return Finding(category="delivery", subject=env, message=message, severity=WARNING)
    if retired:
        message = head + (
            "each old shard's Application and Kustomization stays, retired, and deletes none "
            "of them, so both controllers keep them running (ADR 258)"
        )
        return Finding(category="delivery", subject=env, message=message, severity=INFO)
    message = head + (
        "the old shards are deleted, and their controllers may delete these nodes' objects "
        "before the new shards apply them: a BATCH flow's Jobs run again and Deployments "
        "restart (ADR 258); compile into the committed tree, or commit this between runs"
    )
    return Finding(category="delivery", subject=env, message=message, severity=WARNING)
