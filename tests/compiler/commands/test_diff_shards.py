"""``vf diff`` says when a commit moves nodes between the Applications (Kustomizations)
that deliver them (ADRs 225, 238, 246, 249, 256, 258): growing past the shard threshold, going
back below it, or changing the shard count; and what each controller does with the moved
objects. The cameras example (Argo CD and Flux), the threshold lowered; the new tree is
compiled over the committed one, as ``vf diff`` compiles it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import vf.emit.shards as shards_module
from tests.support import EXAMPLES
from vf.commands.diff.command import diff_project
from vf.commands.diff.plan import INFO, WARNING, Finding
from vf.commands.diff.shards import node_owners
from vf.pipeline import CompileRequest, CompileResult, compile_project
from vf.tree.write import write_tree


def _compiled(
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    buckets: int | None,
    *,
    over: Path | None = None,
    limit: int | None = None,
) -> CompileResult:
    """The cameras example in ``buckets`` node shards (the threshold lowered), or in none;
    ``over``: the committed tree it is compiled over; ``limit``: a shard's most objects."""
    with monkeypatch.context() as patch:
        if buckets is not None:
            patch.setattr(shards_module, "SHARD_OVER", 3)
            patch.setattr(shards_module, "SHARD_BUCKETS", buckets)
        if limit is not None:
            patch.setattr(shards_module, "SHARD_MAX_OBJECTS", limit)
        folder = root / "project"
        if not folder.exists():
            shutil.copytree(EXAMPLES / "realtime_cameras", folder)
        return compile_project(CompileRequest(graph=str(folder / "graph.py"), chart_from=over))


def _delivery(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    before: int | None,
    after: int | None,
    *,
    retire: bool = True,
    limit: int | None = None,
) -> list[Finding]:
    """The delivery findings of ``vf diff`` from ``before`` node shards (None: the overlay)
    to ``after`` (``limit``: a shard's most objects there); ``retire``: the new tree
    compiled over the committed one."""
    committed = _compiled(tmp_path, monkeypatch, before)
    write_tree(tmp_path / "deploy", committed.tree)
    over = tmp_path / "deploy" if retire else None
    fresh = _compiled(tmp_path, monkeypatch, after, over=over, limit=limit)
    report = diff_project(fresh, out=tmp_path / "deploy", environments=("dev",))
    (env,) = report.environments
    return [f for f in env.findings if f.category == "delivery"]


def test_growing_past_the_threshold_is_said_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (finding,) = _delivery(tmp_path, monkeypatch, None, 16)
    assert finding.severity == INFO
    assert "delivered in shards from this commit" in finding.message
    assert "keep running" in finding.message


def test_going_back_below_the_threshold_is_said_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (finding,) = _delivery(tmp_path, monkeypatch, 16, None)
    assert finding.severity == INFO
    assert "no longer delivered in shards" in finding.message
    assert "retired" in finding.message and "keep them running" in finding.message


def test_a_tree_that_drops_the_shards_warns_that_the_nodes_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compiled without the committed tree, the new tree has no retired shard."""
    (finding,) = _delivery(tmp_path, monkeypatch, 16, None, retire=False)
    assert finding.severity == WARNING
    assert "no longer delivered in shards" in finding.message
    assert "Jobs run again" in finding.message


def test_a_shard_count_that_keeps_numbers_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tree whose shards a vf numbered otherwise: shard 01 stays, with fewer nodes."""
    (finding,) = _delivery(tmp_path, monkeypatch, 1, 2)
    assert finding.severity == WARNING
    assert "move to another shard (1 to 2 shards with nodes)" in finding.message
    assert "keeps its number but loses nodes prunes them" in finding.message


def _doubled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, retire: bool) -> Finding:
    """From one node shard to more, past a lowered object limit: numbered anew."""
    (finding,) = _delivery(tmp_path, monkeypatch, 1, 1, retire=retire, limit=3)
    return finding


def test_a_doubled_shard_count_is_said_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    finding = _doubled(tmp_path, monkeypatch, retire=True)
    assert finding.severity == INFO
    assert "move to another shard (1 to " in finding.message
    assert "stays, retired" in finding.message and "keep them running" in finding.message


def test_a_doubled_shard_count_without_the_committed_tree_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    finding = _doubled(tmp_path, monkeypatch, retire=False)
    assert finding.severity == WARNING
    assert "the old shards are deleted" in finding.message


def test_the_same_shards_say_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _delivery(tmp_path, monkeypatch, 16, 16) == []
    assert _delivery(tmp_path, monkeypatch, None, None) == []
    # a retired tree compiled again: its folder holds no node, nothing moves
    committed = _compiled(tmp_path, monkeypatch, 16)
    write_tree(tmp_path / "sharded", committed.tree)
    shrunk = _compiled(tmp_path, monkeypatch, None, over=tmp_path / "sharded")
    assert node_owners(shrunk.tree, env="dev") is None


def test_a_nodes_shard_is_read_from_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _compiled(tmp_path, monkeypatch, 16)
    owners = node_owners(result.tree, env="dev")
    assert owners is not None
    plan = next(p for p in result.plans if p.environment == "dev")
    assert set(owners) == {w.node for w in plan.workloads}
    folders = {p.split("/")[2] for p in result.tree if p.startswith("shards/dev/")}
    assert set(owners.values()) == folders - {"00"}
    assert node_owners(result.tree, env="nowhere") is None
