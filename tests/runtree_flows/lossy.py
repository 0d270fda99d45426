"""BATCH: numbers → a sink that starts reading late, so a test can lose an item between."""

import os

from tree_nodes import Numbers, Record

from vf import BATCH, Flow


def build_flow() -> Flow:
    numbers = Numbers(count=int(os.environ.get("VF_TEST_COUNT", "40")), name="numbers")
    sink = Record(path=os.environ["VF_TEST_OUT"], open_delay=10.0, name="sink")(numbers)
    return Flow([sink], flow_type=BATCH, flow_id="tree-lossy")
