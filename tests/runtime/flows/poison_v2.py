"""BATCH: the poison flow after a graph change (one more node), so a new run id."""

import os

from testnodes import Numbers, Record, Scale

from vf import BATCH, DeliveryPolicy, Flow


def build_flow() -> Flow:
    numbers = Numbers(count=6, name="numbers")
    scale = Scale(fail_on=3, delivery=DeliveryPolicy(max_retries=1), name="scale")(numbers)
    again = Scale(factor=3, name="again")(scale)
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(again)
    return Flow([sink], flow_type=BATCH, flow_id="poison")
