"""vf finds the tools make setup installed in .tools/bin without PATH, and says where it
looked when a tool is nowhere (vf run-tree --renderer helm right after make demo)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from vf.errors import VfError
from vf.runtree import manifests
from vf.runtree.manifests import render_command
from vf.runtree.tools import TOOLS_DIR


def _fake(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / name
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return tool


def test_helm_in_the_projects_tools_folder_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    helm = _fake(tmp_path / TOOLS_DIR, "helm")
    command = render_command(tmp_path, env="dev", renderer="helm", namespace="ns")
    assert command[0] == str(helm)


def test_a_missing_tool_names_where_vf_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(VfError) as caught:
        manifests._tool("vf-absent-tool")  # the checkout's own .tools/bin may hold kubectl
    message = caught.value.render()
    assert caught.value.code == "VF_RUN_TREE_TOOL"
    assert str(tmp_path / TOOLS_DIR / "vf-absent-tool") in message
    assert "run scripts/fetch-tools (or make setup" in message
