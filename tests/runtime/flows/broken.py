"""BATCH: a processor that fails on every item, as a replica with a wedged GPU would."""

import os

from testnodes import Numbers, Record, Scale

from vf import BATCH, DeliveryPolicy, Flow


def build_flow() -> Flow:
    numbers = Numbers(count=12, name="numbers")
    broken = DeliveryPolicy(max_retries=1)
    scale = Scale(fail_from=1, delivery=broken, name="scale")(numbers)
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(scale)
    return Flow([sink], flow_type=BATCH, flow_id="broken")
