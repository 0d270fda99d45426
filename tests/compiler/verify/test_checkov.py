"""checkov over every example's built overlays: zero failed checks with ``tests/checkov.yaml``,
and each check that file skips has a written reason, is documented in docs/security.md, and
still fires without the skip (a suppression nothing needs is removed, not kept).

checkov runs offline (``skip-download``) from its own virtual environment, ``.tools/checkov``,
which ``scripts/fetch-checkov`` creates: its pins cannot share one environment with pytest.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO, kustomize_build
from vf.pipeline import CompileResult
from vf.tree.write import write_tree

pytestmark = pytest.mark.slow  # real servers, renders or long runs: make test-fast skips it

CHECKOV = REPO / ".tools" / "checkov" / "bin" / "checkov"
CONFIG = REPO / "tests" / "checkov.yaml"
SECURITY_DOC = REPO / "docs" / "security.md"
SKIP_ENTRY = re.compile(r"^\s+- (CKV2?_[A-Z0-9_]+)\s*$")


@pytest.fixture(scope="module")
def checkov() -> str:
    """The checkov executable; its absence is a failed setup, not a skip."""
    if not CHECKOV.is_file():
        pytest.fail("checkov is missing at .tools/checkov: run scripts/fetch-checkov (or setup)")
    return str(CHECKOV)


@pytest.fixture(scope="module")
def built(
    compiled_examples: dict[str, CompileResult],
    kubectl: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """``kubectl kustomize overlays/<env>`` of every example, one file per overlay."""
    out = tmp_path_factory.mktemp("built")
    for example, result in compiled_examples.items():
        root = tmp_path_factory.mktemp(example) / "deploy"
        write_tree(root, result.tree)
        for plan in result.plans:
            overlay = root / "overlays" / plan.environment
            (out / f"{example}-{plan.environment}.yaml").write_text(
                kustomize_build(kubectl, overlay), encoding="utf-8"
            )
    return out


def _checkov(checkov: str, *args: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [checkov, *args, "--output", "json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    report = json.loads(done.stdout)
    reports: list[dict[str, Any]] = report if isinstance(report, list) else [report]
    return reports


def _skips() -> list[tuple[str, str]]:
    """``(check id, the comment lines above it)`` for each skip-check entry of the config."""
    entries: list[tuple[str, str]] = []
    comment: list[str] = []
    for line in CONFIG.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        match = SKIP_ENTRY.match(line)
        if match:
            entries.append((match.group(1), " ".join(comment)))
            comment = []
        elif stripped.startswith("#"):
            comment.append(stripped.lstrip("# "))
        else:
            comment = []
    return entries


def test_every_overlay_passes_checkov(checkov: str, built: Path) -> None:
    reports = _checkov(checkov, "--config-file", str(CONFIG), "--directory", str(built))
    assert [r["check_type"] for r in reports] == ["kubernetes"]
    summary = reports[0]["summary"]
    failed = [f"{c['check_id']} {c['resource']}" for c in reports[0]["results"]["failed_checks"]]
    assert failed == []
    assert summary["parsing_errors"] == 0
    assert summary["resource_count"] >= 100
    assert summary["passed"] >= 3000


def test_each_suppression_is_reasoned_documented_and_needed(checkov: str, built: Path) -> None:
    skips = _skips()
    assert skips, "tests/checkov.yaml lists no skip-check entries"
    doc = SECURITY_DOC.read_text(encoding="utf-8")
    for check, reason in skips:
        assert len(reason.split()) >= 8, f"{check} has no written reason above it"
        assert check in doc, f"{check} is not explained in docs/security.md"
    ids = ",".join(check for check, _ in skips)
    args = ("--framework", "kubernetes", "--skip-download", "--check", ids)
    reports = _checkov(checkov, *args, "--directory", str(built))
    fired = {c["check_id"] for c in reports[0]["results"]["failed_checks"]}
    assert fired == {check for check, _ in skips}
