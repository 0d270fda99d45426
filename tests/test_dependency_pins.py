"""The full tool's dependencies: each bounded above, and pinned in compiler-constraints.txt
within its range, the runtime's as the worker image pins them (ADR 218)."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support import REPO

PINS = REPO / "compiler-constraints.txt"


def _declared(pyproject: Path) -> dict[str, Requirement]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    extras = project.get("optional-dependencies", {})
    # the package's dependencies and the worker's traces extra, which its images install
    found = (Requirement(item) for item in [*project["dependencies"], *extras.get("otel", [])])
    return {canonicalize_name(r.name): r for r in found}


def _pins(path: Path) -> dict[str, Version]:
    pinned: dict[str, Version] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            requirement = Requirement(line)
            (specifier,) = requirement.specifier
            assert specifier.operator == "==", line
            pinned[canonicalize_name(requirement.name)] = Version(specifier.version)
    return pinned


def _next_major(version: Version) -> Version:
    """Where the next breaking release starts: the next major, or the next minor before 1.0."""
    if version.major == 0:
        return Version(f"0.{version.minor + 1}")
    return Version(f"{version.major + 1}")


@pytest.mark.parametrize(
    ("pyproject", "pins"),
    [
        ("pyproject.toml", "compiler-constraints.txt"),
        ("runtime/pyproject.toml", "docker/worker-constraints.txt"),
    ],
)
def test_every_dependency_stops_by_the_next_major_after_its_pin(pyproject: str, pins: str) -> None:
    """An upper bound past the pinned version, and no later than its next major (nats-py's
    is the narrower range ADR 171 tested)."""
    pinned = _pins(REPO / pins)
    for name, requirement in _declared(REPO / pyproject).items():
        ceilings = [Version(s.version) for s in requirement.specifier if s.operator == "<"]
        assert len(ceilings) == 1, requirement
        assert pinned[name] < ceilings[0] <= _next_major(pinned[name]), requirement


def test_the_pins_are_exactly_the_dependencies_in_range() -> None:
    declared = _declared(REPO / "pyproject.toml")
    pinned = _pins(PINS)
    assert set(pinned) == set(declared)
    for name, version in pinned.items():
        assert declared[name].specifier.contains(version), (name, version)


def test_the_runtime_is_pinned_as_the_worker_image_pins_it() -> None:
    worker = _pins(REPO / "docker" / "worker-constraints.txt")
    pinned = _pins(PINS)
    assert {name: pinned[name] for name in worker} == worker


def test_the_installed_dependencies_are_in_range() -> None:
    """What this suite runs against is what pyproject.toml promises."""
    for name, requirement in _declared(REPO / "pyproject.toml").items():
        installed = Version(metadata.version(name))
        assert SpecifierSet(str(requirement.specifier)).contains(installed), (name, installed)


def test_the_sdist_ships_the_pins() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert PINS.name in project["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]
