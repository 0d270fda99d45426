"""BATCH: more items than a BATCH stream holds (its limit is 10,000) → sink."""

import os

from testnodes import Numbers, Record

from vf import BATCH, Flow


def build_flow() -> Flow:
    numbers = Numbers(
        count=int(os.environ["VF_TEST_COUNT"]),
        size=int(os.environ.get("VF_TEST_SIZE", "0")),
        name="numbers",
    )
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(numbers)
    return Flow([sink], flow_type=BATCH, flow_id=os.environ["VF_TEST_FLOW"])
