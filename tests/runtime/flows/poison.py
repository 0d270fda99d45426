"""BATCH: one item always fails and must end in the dead-letter queue with its reason."""

import os

from testnodes import Numbers, Record, Scale

from vf import BATCH, DeliveryPolicy, Flow


def build_flow() -> Flow:
    numbers = Numbers(count=6, name="numbers")
    scale = Scale(fail_on=3, delivery=DeliveryPolicy(max_retries=1), name="scale")(numbers)
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(scale)
    return Flow([sink], flow_type=BATCH, flow_id="poison")
