"""Any BATCH flow delivers every item to every consumer once, whatever its shape.

The runtime's own tests run fixed flows. Here ``vf run-local`` runs random layered flows
(``tests.random_flows``: one producer, fan-out, joins of two branches partitioned by trace
id, one to three replicas a node) on its embedded NATS, and each consumer writes
down the numbers it consumed: each must have every number the producer sent, once.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest
from hypothesis import given

from tests.random_flows import NODES, SEEDS, layered_flow, seeded

pytestmark = pytest.mark.slow  # real servers and worker processes: make test-fast skips it

CONFIG = {"environments": {"local": {"images": {"default": "registry.example.com/any:1"}}}}


@seeded(6)
@given(seed=SEEDS)
def test_every_consumer_gets_every_item_once(
    seed: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp(f"runs-{seed}")
    flow = layered_flow(
        random.Random(seed), flow_id="runs", sources=1, kind="BATCH", sink_dir=str(root)
    )
    (root / "nodes.py").write_text(NODES, encoding="utf-8")
    (root / "graph.py").write_text(flow.source, encoding="utf-8")
    (root / "vf.yaml").write_text(json.dumps(CONFIG), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "vf", "run-local", "graph.py"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (flow.source, done.stderr[-2000:])
    for sink in flow.sinks:
        path = root / f"{sink}.txt"
        consumed = sorted(int(n) for n in path.read_text().split()) if path.exists() else []
        assert consumed == list(range(1, flow.items + 1)), (sink, flow.source)
