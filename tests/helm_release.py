"""The size of the Secret in which Helm stores a release of a chart, computed as Helm does.

Helm's ``secret`` storage driver (``pkg/storage/driver/util.go``, ``encodeRelease``) writes
``base64(gzip(json(release)))`` under the Secret's ``release`` key, gzip at best
compression. The release JSON (``pkg/release/v1``) holds the chart (``pkg/chart/v2``: its
metadata, every template and every other file as base64 bytes, the default values, the
values schema as base64 bytes), the values given at install (``config``) and the rendered
manifest, and the rendered NOTES.txt (``info.notes``; its template text here, about as
long). The API server refuses a Secret whose data exceeds 1 MiB, so this is the number that
decides whether ``helm install`` can succeed. Hooks are kept inside the manifest here (Helm
stores them beside it): the same text either way.

Also the synthetic layered graph of the compile benchmark (BATCH there; REALTIME too
here), so the test and the benchmark measure the same shape.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import subprocess
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

SECRET_LIMIT = 1024 * 1024


def _load(text: str) -> Any:
    return YAML(typ="safe").load(text)


def _file(chart: Path, path: Path) -> dict[str, str]:
    data = base64.b64encode(path.read_bytes()).decode()
    return {"name": path.relative_to(chart).as_posix(), "data": data}


def release_secret_bytes(helm: str, *, chart: Path, values: Path, namespace: str) -> int:
    """Bytes of the ``release`` value Helm stores for ``helm install -f values``."""
    manifest = subprocess.run(
        [helm, "template", "vf", str(chart), "-n", namespace, "-f", str(values)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    files = sorted(p for p in chart.rglob("*") if p.is_file())
    body = {
        "metadata": _load((chart / "Chart.yaml").read_text(encoding="utf-8")),
        "lock": None,
        "templates": [_file(chart, p) for p in files if p.parts[len(chart.parts)] == "templates"],
        "values": _load((chart / "values.yaml").read_text(encoding="utf-8")),
        "schema": base64.b64encode((chart / "values.schema.json").read_bytes()).decode(),
        "files": [
            _file(chart, p)
            for p in files
            if p.parts[len(chart.parts)] != "templates"
            and p.name not in ("Chart.yaml", "values.yaml", "values.schema.json")
        ],
    }
    release = {
        "name": "vf",
        "info": {
            "status": "deployed",
            "description": "Install complete",
            "notes": (chart / "templates" / "NOTES.txt").read_text(encoding="utf-8"),
        },
        "chart": body,
        "config": _load(values.read_text(encoding="utf-8")),
        "manifest": manifest,
        "version": 1,
        "namespace": namespace,
    }
    text = json.dumps(release, separators=(",", ":")).encode()
    return len(base64.b64encode(gzip.compress(text, compresslevel=9, mtime=0)))


LAYERED_NODES = '''"""Node classes of the layered graph."""

from typing import Any

from vf import Consumer, Processor, Producer


class IntProducer(Producer):
    def next(self) -> int:
        raise StopIteration


class IdentityProcessor(Processor):
    def process(self, item: Any) -> Any:
        return item


class JoinerProcessor(Processor):
    def process(self, left: Any, right: Any) -> Any:
        return (left, right)


class PrintConsumer(Consumer):
    def consume(self, item: Any) -> None:
        print(item)


'''
LAYERED = '''"""A layered {kind} graph of {n} nodes: {w} lanes, {d} layers, {r} tail nodes."""

from layered_nodes import IdentityProcessor, IntProducer, JoinerProcessor, PrintConsumer

from vf import {kind}, Flow


def build_flow() -> Flow:
    w, d, r = {w}, {d}, {r}
    src = IntProducer(name="src")
    lane = [IdentityProcessor(name=f"p-{{j}}-1")(src) for j in range(w)]
    for layer in range(2, d + 1):
        prev = lane
        lane = [
            JoinerProcessor(name=f"p-{{j}}-{{layer}}")(prev[j], prev[j - 1])
            if layer % 5 == 3 and j % 2 == 1
            else IdentityProcessor(name=f"p-{{j}}-{{layer}}")(prev[j])
            for j in range(w)
        ]
    for k in range(1, r + 1):
        lane[0] = IdentityProcessor(name=f"tail-{{k}}")(lane[0])
    return Flow([PrintConsumer(name=f"sink-{{j}}")(lane[j]) for j in range(w)],
                flow_type={kind}, flow_id="layered")
'''
LAYERED_CONFIG = """environments:
  dev:
    namespace: layered-dev
    images: {{default: registry.example.com/vf-worker:bench}}
  prod:
    namespace: layered
    images: {{default: registry.example.com/vf-worker:{prod}}}
"""


def write_layered(
    folder: Path, *, nodes: int, prod_image: str = "bench", kind: str = "BATCH"
) -> Path:
    """The compile benchmark's graph shape with ``nodes`` nodes, and its vf.yaml; a prod
    image of its own gives prod a BATCH generation of its own (other Job names)."""
    w = max(2, round(math.sqrt(nodes) / 3))
    d = (nodes - 1 - w) // w
    r = (nodes - 1 - w) - w * d
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vf.yaml").write_text(LAYERED_CONFIG.format(prod=prod_image), encoding="utf-8")
    (folder / "layered_nodes.py").write_text(LAYERED_NODES, encoding="utf-8")
    graph = folder / "graph.py"
    graph.write_text(LAYERED.format(n=nodes, w=w, d=d, r=r, kind=kind), encoding="utf-8")
    return graph
