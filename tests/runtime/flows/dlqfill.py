"""BATCH: every item fails from ``VF_TEST_FAIL_FROM`` on, so each becomes a dead letter."""

import os

from testnodes import Numbers, Record, Scale

from vf import BATCH, Flow


def build_flow() -> Flow:
    env = os.environ.get
    numbers = Numbers(count=int(env("VF_TEST_COUNT", "10")), name="numbers")
    scale = Scale(fail_from=int(env("VF_TEST_FAIL_FROM", "1")), name="scale")(numbers)
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(scale)
    return Flow([sink], flow_type=BATCH, flow_id=os.environ["VF_TEST_FLOW"])
