"""Fields the API server refuses to change in place: a ResourceClaimTemplate's spec is safe
by construction (its name carries a digest of it); a claim's storage class or a smaller
size, and a StatefulSet's claim templates, are named by ``vf diff`` with what to do."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import example_graph
from vf.commands.diff.command import diff_project
from vf.commands.diff.plan import BREAKING
from vf.pipeline import CompileRequest, compile_project
from vf.tree.write import write_tree


def _project(tmp_path: Path, example: str) -> Path:
    target = tmp_path / example
    shutil.copytree(Path(example_graph(example)).parent, target)
    return target


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) >= 1, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def _diff_after(
    project: Path, out: Path, edit: tuple[Path, str, str]
) -> list[tuple[str, str, str]]:
    graph = str(project / "graph.py")
    write_tree(out, compile_project(CompileRequest(graph=graph)).tree)
    _edit(*edit)
    report = diff_project(compile_project(CompileRequest(graph=graph)), out=out)
    found = [(f.severity, f.subject, f.message) for e in report.environments for f in e.findings]
    for severity, subject, message in found:
        print(f"{severity}: {subject}: {message}")
    return found


@pytest.mark.slow
def test_a_changed_gpu_claim_is_a_new_claim_template_not_a_refused_edit(tmp_path: Path) -> None:
    project = _project(tmp_path, "video_analytics")
    edit = (project / "graph.py", "gpu_memory_gib=9", "gpu_memory_gib=12")
    found = _diff_after(project, tmp_path / "deploy", edit)
    replaced = [m for _, s, m in found if s.startswith("ResourceClaimTemplate/")]
    assert replaced and all(m.startswith("replaces ResourceClaimTemplate/") for m in replaced)
    assert not [s for sev, s, _ in found if sev == BREAKING]  # nothing the API server refuses


def test_a_claims_storage_class_and_shrink_are_named_with_what_to_do(tmp_path: Path) -> None:
    project = _project(tmp_path, "batch_pipeline")
    config = project / "vf.yaml"
    text = config.read_text(encoding="utf-8")
    config.write_text(
        text.replace(
            "storage_class: fast-ssd\n      storage_size: 20Gi",
            "storage_class: standard\n      storage_size: 10Gi",
        ),
        encoding="utf-8",
    )
    edited = config.read_text(encoding="utf-8")
    config.write_text(text, encoding="utf-8")
    found = _diff_after(project, tmp_path / "deploy", (config, text, edited))
    claim = [(sev, m) for sev, s, m in found if s.startswith("PersistentVolumeClaim/")]
    assert any(sev == BREAKING and "storage class fast-ssd → standard" in m for sev, m in claim)
    assert any(sev == BREAKING and "never shrinks" in m for sev, m in claim)
    # under Argo CD's server-side diff one refused object stops the whole Application
    assert all("the whole Application's comparison an error" in m for _, m in claim)
    broker = [
        m for _, s, m in found if s.startswith("StatefulSet/") and "volumeClaimTemplates" in m
    ]
    assert not broker  # only the store's claim changed


def test_leaving_the_old_local_path_default_is_named_with_how_to_keep_it(
    tmp_path: Path,
) -> None:
    """A tree compiled when vf named local-path by default holds claims of that class; the
    cluster's default now serves a claim without one, and the API server refuses that change
    on an existing claim: vf diff says so and how to keep the claims."""
    project = _project(tmp_path, "video_analytics")
    config = project / "vf.yaml"
    text = config.read_text(encoding="utf-8")
    durable = "      profile: durable\n"
    assert text.count(durable) == 2
    config.write_text(
        text.replace(durable, durable + "      storage_class: local-path\n"), encoding="utf-8"
    )
    old = config.read_text(encoding="utf-8")
    found = _diff_after(project, tmp_path / "deploy", (config, old, text))
    claim = [(sev, m) for sev, s, m in found if s.startswith("PersistentVolumeClaim/")]
    assert claim and all(sev == BREAKING for sev, _ in claim)
    assert any("local-path → (the cluster's default)" in m for _, m in claim)
    assert any("storage_class: local-path" in m for _, m in claim)
    broker = [
        m for sev, s, m in found if s.startswith("StatefulSet/") and "volumeClaimTemplates" in m
    ]
    assert broker  # the durable broker's claim template too


@pytest.mark.slow
def test_a_growing_claim_is_a_warning_about_volume_expansion(tmp_path: Path) -> None:
    project = _project(tmp_path, "batch_pipeline")
    config = project / "vf.yaml"
    found = _diff_after(
        project, tmp_path / "deploy", (config, "storage_size: 20Gi", "storage_size: 40Gi")
    )
    assert any("allowVolumeExpansion" in m for _, s, m in found if "PersistentVolumeClaim" in s)
