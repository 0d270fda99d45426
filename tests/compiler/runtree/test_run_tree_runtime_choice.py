"""``vf run-tree --runtime auto`` says when it chose podman, and how to choose processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from vf.runtree import podman_runtime


def _choose(monkeypatch: pytest.MonkeyPatch, choice: str, *, podman: bool) -> list[str]:
    monkeypatch.setattr(podman_runtime, "find_podman", lambda: "podman" if podman else None)
    monkeypatch.setattr(podman_runtime, "require_podman", object)
    monkeypatch.setattr(podman_runtime, "PodmanRuntime", lambda engine: engine)
    monkeypatch.setattr(podman_runtime, "prepare_images", lambda *a, **k: None)
    said: list[str] = []
    podman_runtime.select_runtime(
        choice,
        resolver=None,
        app_dir=Path("."),
        build=True,
        log=said.append,  # type: ignore[arg-type]
    )
    return said


def test_auto_names_podman_and_the_way_to_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    said = _choose(monkeypatch, "auto", podman=True)
    assert len(said) == 1
    assert "podman" in said[0] and "--runtime process" in said[0]


@pytest.mark.parametrize(("choice", "podman"), [("podman", True), ("auto", False)])
def test_an_explicit_choice_or_no_podman_says_nothing(
    monkeypatch: pytest.MonkeyPatch, choice: str, podman: bool
) -> None:
    assert _choose(monkeypatch, choice, podman=podman) == []
