"""A fake ``nvidia-smi`` for the local GPU tests: hosts with zero, one, several, MIG-split,
busy or failing GPUs. The only thing faked is the nvidia-smi binary (no GPU machine here)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

A100 = "NVIDIA A100-SXM4-80GB"
UUID = "GPU-{n}aaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
NO_DEVICES = {"code": 6, "stdout": "No devices were found\n"}
NO_DRIVER = {
    "code": 9,
    "stdout": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n",
}


def uuid(n: int) -> str:
    return UUID.format(n=n)


def card_row(n: int, *, memory: int = 81920, used: int = 0, mig: str = "Disabled") -> str:
    return f"{n}, {uuid(n)}, {A100}, {memory}, {used}, {mig}"


def host(
    cards: list[str],
    *,
    migs: dict[int, list[tuple[str, str]]] | None = None,
    apps: list[str] | None = None,
    fail: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A scenario: the answers to --query-gpu, -L and --query-compute-apps."""
    listing = []
    for row in cards:
        n = int(row.split(",")[0])
        listing.append(f"GPU {n}: {A100} (UUID: {uuid(n)})")
        for profile, mig_uuid in (migs or {}).get(n, []):
            index = len([x for x in listing if x.startswith("  MIG")])
            listing.append(f"  MIG {profile:<11} Device  {index}: (UUID: {mig_uuid})")
    return {
        "query_gpu": "".join(f"{row}\n" for row in cards),
        "list": "".join(f"{line}\n" for line in listing),
        "apps": "".join(f"{line}\n" for line in apps or []),
        "fail": fail or {},
    }


ZERO = host([], fail={"query_gpu": NO_DEVICES, "list": NO_DEVICES, "apps": NO_DEVICES})
ONE = host([card_row(0, memory=24576, used=512)])
SEVERAL = host([card_row(n, used=100 * n) for n in range(4)])
MIG_SPLIT = host(
    [card_row(0, used=37, mig="Enabled"), card_row(1)],
    migs={0: [("3g.40gb", "MIG-11111111-2222-3333-4444-555555555555"),
              ("1g.10gb", "MIG-66666666-7777-8888-9999-000000000000")]},
)  # fmt: skip
FAILING = host([], fail={"query_gpu": NO_DRIVER, "list": NO_DRIVER, "apps": NO_DRIVER})
BUSY = host([card_row(0), card_row(1, used=30000)], apps=[f"{uuid(1)}, 4242, 29000"])

SCRIPT = """\
#!{python}
import json, os, sys
scenario = json.load(open(os.environ["FAKE_NVIDIA_SMI"]))
arg = sys.argv[1] if len(sys.argv) > 1 else ""
name = "list" if arg == "-L" else "apps" if arg.startswith("--query-compute-apps") else "query_gpu"
if not arg.startswith(("--query-gpu", "--query-compute-apps", "-L")):
    sys.exit(2)
failure = scenario["fail"].get(name)
if failure:
    sys.stdout.write(failure["stdout"])
    sys.exit(failure["code"])
sys.stdout.write(scenario[name])
"""


def install(directory: Path, scenario: dict[str, Any]) -> dict[str, str]:
    """Write the fake and the scenario; returns the environment that puts it first on PATH."""
    bin_dir = directory / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "nvidia-smi"
    fake.write_text(SCRIPT.format(python=sys.executable))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    data = directory / "nvidia-smi.json"
    data.write_text(json.dumps(scenario))
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_NVIDIA_SMI": str(data)}
