"""videoflow, the project vf is measured against, built from its source for side-by-side runs.

The benchmarks run videoflow in the same run as vf, alternating, on the same shapes. Its
source is looked for in ``../shared/peers/videoflow`` next to the checkout (``--peer``
overrides it). The first run builds a Python 3.12 virtual environment for it under
``bench/.peer/`` (ignored by git) with its ``deploy`` and ``blob`` extras and OpenCV, which
its stock nodes import; later runs reuse it. When the source is not there, the benchmarks
say so and measure vf alone.

The drivers below are vf's own: they call videoflow's public library entry points the way
its deploy CLI and its local engine document them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = ROOT.parent / "shared" / "peers" / "videoflow"
PEER_DIR = ROOT / "bench" / ".peer"
VENV = PEER_DIR / "venv"
MARKER = PEER_DIR / "built-from"
EXTRA_PACKAGES = ("opencv-python-headless",)

# Renders the layered benchmark shape (W lanes, D layers, R tail nodes) once per
# namespace, each to one multi-document YAML file, as videoflow's deploy path does.
COMPILE_DRIVER = """
import sys
from videoflow.consumers.basic import CommandlineConsumer
from videoflow.core.compiler import compile_flow
from videoflow.core.flow import Flow
from videoflow.deploy.manifests import dump_manifests, render_manifests
from videoflow.processors.basic import IdentityProcessor, JoinerProcessor
from videoflow.producers.basic import IntProducer

w, d, r = (int(v) for v in sys.argv[1:4])
out, namespaces = sys.argv[4], sys.argv[5].split(",")
src = IntProducer(start_value=0, end_value=99, name="src")
lane = [IdentityProcessor(name=f"p-{j}-1")(src) for j in range(w)]
for depth in range(2, d + 1):
    prev = lane
    lane = [
        JoinerProcessor(name=f"p-{j}-{depth}")(prev[j], prev[j - 1])
        if depth % 5 == 3 and j % 2 == 1
        else IdentityProcessor(name=f"p-{j}-{depth}")(prev[j])
        for j in range(w)
    ]
for k in range(1, r + 1):
    lane[0] = IdentityProcessor(name=f"tail-{k}")(lane[0])
sinks = [CommandlineConsumer(name=f"sink-{j}")(lane[j]) for j in range(w)]
flow = Flow(sinks, flow_type="batch", flow_id="peerbench")
specs = compile_flow(flow)
for namespace in namespaces:
    manifests = render_manifests(
        specs, "peerbench", "batch", "nats://nats.default.svc:4222", "r0001",
        namespace=namespace, default_image="registry.example.com/videoflow-worker:bench",
    )
    with open(f"{out}-{namespace}.yaml", "w", encoding="utf-8") as f:
        f.write(dump_manifests(manifests))
"""


def python312() -> str | None:
    """A Python 3.12 interpreter: ``python3.12`` on PATH, else pyenv's 3.12."""
    found = shutil.which("python3.12")
    if found:
        return found
    pyenv = shutil.which("pyenv")
    if pyenv is None:
        return None
    for version in ("3.12", "3.12.1"):
        done = subprocess.run(
            [pyenv, "prefix", version], check=False, capture_output=True, text=True
        )
        if done.returncode == 0:
            break
    prefix = done.stdout.strip().splitlines()[-1] if done.returncode == 0 else ""
    candidate = Path(prefix) / "bin" / "python3.12"
    return str(candidate) if prefix and candidate.exists() else None


def peer_python(source: Path = DEFAULT_SOURCE) -> str | None:
    """The interpreter of videoflow's venv, built on first use; None (said on stderr) when
    the source or a Python 3.12 is missing."""
    if not (source / "pyproject.toml").exists():
        print(f"videoflow: skipped: ../shared absent (no source at {source})", file=sys.stderr)
        return None
    python = VENV / "bin" / "python"
    if python.exists() and MARKER.exists() and MARKER.read_text() == str(source.resolve()):
        return str(python)
    base = python312()
    if base is None:
        print("videoflow: skipped: no Python 3.12 to build its venv", file=sys.stderr)
        return None
    print(f"videoflow: building its venv under {VENV} (once)", file=sys.stderr)
    PEER_DIR.mkdir(parents=True, exist_ok=True)
    subprocess.run([base, "-m", "venv", "--clear", str(VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, f"{source.resolve()}[deploy,blob]", *EXTRA_PACKAGES], check=True)
    MARKER.write_text(str(source.resolve()))
    return str(python)


def compile_driver() -> Path:
    """The driver script that renders a benchmark shape with videoflow."""
    PEER_DIR.mkdir(parents=True, exist_ok=True)
    path = PEER_DIR / "compile_driver.py"
    if not path.exists() or path.read_text() != COMPILE_DRIVER:
        path.write_text(COMPILE_DRIVER)
    return path


def peer_label(python: str | None) -> str:
    """What the tables say about the peer: its version, or that it was skipped."""
    if python is None:
        return "videoflow skipped (its source is absent)"
    code = (
        "import videoflow.version as v, platform; print(v.__version__, platform.python_version())"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    version, py = done.stdout.split()
    return f"videoflow {version} built from source, Python {py}"
