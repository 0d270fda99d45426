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

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    """A Python 3.12 interpreter: a working ``python3.12`` on PATH, else pyenv's 3.12."""
    found = shutil.which("python3.12")
    if found and subprocess.run([found, "-c", "pass"], check=False).returncode == 0:
        return found  # a pyenv shim of a version not selected exists but does not run
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


# The runtime benchmark's nodes, written for videoflow's node API: the same items
# ({"i", "t0", "pad"}), pacing, 20 ms stage and sink records as vf's bench nodes.
RUNTIME_NODES = """
import json, time
from videoflow.core.node import ConsumerNode, ProcessorNode, ProducerNode

class Source(ProducerNode):
    def __init__(self, count=100, size=1024, rate=0.0, **kwargs):
        self.count, self.size, self.rate = count, size, rate
        self._n, self._next_at = 0, None
        super().__init__(**kwargs)
    def next(self):
        if self._n >= self.count:
            raise StopIteration()
        if self.rate:
            now = time.monotonic()
            self._next_at = self._next_at or now
            if self._next_at > now:
                time.sleep(self._next_at - now)
            self._next_at += 1.0 / self.rate
        self._n += 1
        return {"i": self._n, "t0": time.time(), "pad": b"x" * self.size}

class Identity(ProcessorNode):
    def process(self, item):
        return item

def spin(rounds):
    total = 0
    for i in range(rounds):
        total += i * i
    return total

class Work(ProcessorNode):
    def __init__(self, ms=20.0, rounds=0, **kwargs):
        self.ms, self.rounds = ms, rounds
        super().__init__(**kwargs)
    def process(self, item):
        if self.rounds:
            spin(self.rounds)
        else:
            time.sleep(self.ms / 1000)
        return item

class Sink(ConsumerNode):
    def __init__(self, path="", **kwargs):
        self.path = path
        super().__init__(**kwargs)
    def open(self):
        self._out = open(self.path, "a", buffering=1)
    def consume(self, item):
        self._out.write(json.dumps([item["i"], item["t0"], time.time()]) + "\\n")
"""

# One flow through videoflow's local engine (one subprocess per node replica), to the end.
RUNTIME_DRIVER = """
import json, sys
params = json.loads(sys.argv[1])
sys.path.insert(0, params["work"])
from peer_nodes import Identity, Sink, Source, Work
from videoflow.core.flow import Flow
from videoflow.engines.local import LocalProcessEngine

node = Source(count=params["count"], size=params["size"], rate=params["rate"], name="source")
for depth in range(params["depth"]):
    node = Identity(name=f"hop{depth}")(node)
if params["kind"]:
    node = Work(ms=params["work_ms"], rounds=params["rounds"], nb_tasks=params["replicas"],
                name="work")(node)
sink = Sink(path=params["out"], name="sink")(node)
flow = Flow([sink], flow_type="batch", flow_id=params["flow"])
flow.run(LocalProcessEngine(nats_url=params["nats"], blob_redis_url=params["redis"] or None))
flow.join()
"""


def runtime_driver(work: Path) -> Path:
    """Write videoflow's bench nodes and driver into ``work``; the driver's path."""
    (work / "peer_nodes.py").write_text(RUNTIME_NODES)
    path = work / "peer_driver.py"
    path.write_text(RUNTIME_DRIVER)
    return path


def peer_flow(python: str, work: Path, *, nats_url: str, redis_url: str, **params: Any) -> Any:
    """Run one bench flow through videoflow's local engine; the sink's records
    ``[i, produced at, consumed at]``, checked complete."""
    out = work / f"peer-{params['flow']}.jsonl"
    out.unlink(missing_ok=True)
    spec = {
        "work": str(work),
        "count": params["count"],
        "size": params.get("size", 1024),
        "rate": params.get("rate", 0.0),
        "depth": params.get("depth", 0),
        "kind": params.get("kind", ""),
        "work_ms": params.get("work_ms", 0),
        "rounds": params.get("rounds", 0),
        "replicas": params.get("replicas", 1),
        "out": str(out),
        "flow": params["flow"],
        "nats": nats_url,
        "redis": redis_url,
    }
    argv = [python, str(runtime_driver(work)), json.dumps(spec)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    if done.returncode != 0 or len(records) != params["count"]:
        tail = done.stderr[-3000:]
        raise SystemExit(
            f"videoflow flow {params['flow']}: exit {done.returncode}, "
            f"{len(records)} records\n{tail}"
        )
    return records


def cached_bytecode() -> None:
    """Let every process the benchmark starts keep its compiled bytecode, as an installed
    package does: without it each start compiles every module from source again, which
    is what ``PYTHONDONTWRITEBYTECODE`` in a development shell causes. The caches go
    under ``bench/.peer/pycache`` (ignored by git), not beside the sources."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(PEER_DIR / "pycache")
