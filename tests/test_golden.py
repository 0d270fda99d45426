"""Golden trees: every file each example emits, mirrored under ``tests/golden/<example>/``.

Regenerate on purpose only: ``pytest tests/test_golden.py --snapshot-update``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode
from syrupy.location import PyTestLocation
from syrupy.types import SnapshotIndex

from tests.support import EXAMPLE_NAMES
from vf.pipeline import CompileResult
from vf.tree.write import with_manifest

GOLDEN = Path(__file__).resolve().parent / "golden"


class TreeFile(SingleFileSnapshotExtension):
    """One snapshot file per emitted file: ``golden/<example>/<path with / as __>.golden``."""

    _write_mode = WriteMode.TEXT
    file_extension = "golden"

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        example = test_location.testname.partition("[")[2].rstrip("]")
        return str(GOLDEN / example)

    @classmethod
    def discovery_dirname(cls, *, test_location: PyTestLocation) -> str:
        return cls.dirname(test_location=test_location)

    @classmethod
    def get_snapshot_name(cls, *, test_location: PyTestLocation, index: SnapshotIndex = 0) -> str:
        return str(index).replace("/", "__")


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_tree_matches_golden(
    example: str, compiled_examples: dict[str, CompileResult], snapshot: SnapshotAssertion
) -> None:
    tree = with_manifest(compiled_examples[example].tree)
    golden = snapshot.use_extension(TreeFile)
    for path in sorted(tree):
        assert tree[path] == golden(name=path)


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_no_stale_golden_files(example: str, compiled_examples: dict[str, CompileResult]) -> None:
    expected = {
        p.replace("/", "__") + ".golden" for p in with_manifest(compiled_examples[example].tree)
    }
    on_disk = {p.name for p in (GOLDEN / example).iterdir()}
    assert on_disk == expected, "stale golden files: rerun with --snapshot-update and review"
