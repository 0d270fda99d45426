"""Each make target fetches what it needs: ``make demo`` the venv and kubectl only (no helm,
no checkov, no container tools), ``make setup`` and ``make test`` the full set-up. Read
from GNU make's own dry run of the project's Makefile on a fresh checkout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.support import require

ROOT = Path(__file__).resolve().parent.parent


def _dry_run(tmp_path: Path, target: str) -> list[str]:
    """The commands ``make -n TARGET`` would run in a checkout without a venv."""
    make = shutil.which("make")
    require(make is not None, "make is not on PATH")
    assert make is not None
    checkout = tmp_path / "checkout"
    if not checkout.exists():
        (checkout / "scripts").mkdir(parents=True)
        for name in ("Makefile", "pyproject.toml"):
            shutil.copy(ROOT / name, checkout / name)
        for script in (ROOT / "scripts").iterdir():
            shutil.copy(script, checkout / "scripts" / script.name)
    done = subprocess.run(
        [make, "-n", target], cwd=checkout, capture_output=True, text=True, check=True
    )
    return [line.strip() for line in done.stdout.splitlines()]


def test_make_demo_sets_up_only_the_venv_and_kubectl(tmp_path: Path) -> None:
    commands = _dry_run(tmp_path, "demo")
    setups = [c.split("bash ", 1)[1] for c in commands if "scripts/" in c]
    assert setups == ["scripts/setup --demo"], commands


def test_make_setup_and_make_test_fetch_the_test_tools(tmp_path: Path) -> None:
    for target in ("setup", "test"):
        commands = _dry_run(tmp_path, target)
        assert any(c.endswith("bash scripts/setup") for c in commands), commands


def test_the_demo_set_up_stops_before_the_test_tools_and_a_wrong_option_is_refused() -> None:
    script = (ROOT / "scripts" / "setup").read_text()
    stop = script.index('if "$demo"; then')
    for fetch in ("bash scripts/fetch-tools", "bash scripts/fetch-checkov", "apt-get install"):
        assert script.index(fetch) > stop, fetch
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup"), "--everything"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2 and "usage: scripts/setup [--demo]" in done.stderr
