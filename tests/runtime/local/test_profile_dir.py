"""A worker asked to profile itself creates the profile folder, or refuses it by name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

WORKER = [sys.executable, "-m", "vf_runtime.worker.replica"]


def _worker(profile_dir: Path) -> subprocess.CompletedProcess[str]:
    # No worker configuration: the worker stops at start-up with VF_ENV, after the profiler
    # has been set up, which is all these tests need.
    env = {k: v for k, v in os.environ.items() if not k.startswith("VF_")}
    env["VF_PROFILE_DIR"] = str(profile_dir)
    return subprocess.run(WORKER, check=False, env=env, capture_output=True, text=True, timeout=60)


def test_a_missing_profile_folder_is_created_and_holds_the_profile(tmp_path: Path) -> None:
    folder = tmp_path / "profiles" / "run"
    done = _worker(folder)
    assert done.returncode == 2, done.stderr
    assert "error[VF_ENV]" in done.stderr
    assert "Traceback" not in done.stderr
    assert [p.suffix for p in folder.iterdir()] == [".prof"]


def test_a_profile_folder_that_cannot_be_made_is_refused_by_name(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    done = _worker(blocker / "profiles")
    assert done.returncode == 2, done.stderr
    assert "error[VF_PROFILE_DIR]" in done.stderr
    assert str(blocker / "profiles") in done.stderr
    assert "= fix:" in done.stderr
    assert "Traceback" not in done.stderr
    assert "error[VF_ENV]" not in done.stderr  # refused before the worker started
