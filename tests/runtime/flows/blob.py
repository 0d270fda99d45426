"""BATCH: 4 MiB payloads travel through the payload store."""

import os

from testnodes import Numbers, Record

from vf import BATCH, Flow


def build_flow() -> Flow:
    numbers = Numbers(count=3, size=4 * 1024 * 1024, name="numbers")
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(numbers)
    return Flow([sink], flow_type=BATCH, flow_id="blobs")
