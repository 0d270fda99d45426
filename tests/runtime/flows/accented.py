"""BATCH: one item fails with a reason in non-ASCII text, which its dead letter keeps."""

import os

from testnodes import Numbers, Record, Scale

from vf import BATCH, DeliveryPolicy, Flow


def build_flow() -> Flow:
    count = int(os.environ.get("VF_TEST_COUNT", "6"))
    numbers = Numbers(count=count, name="numbers")
    policy = DeliveryPolicy(max_retries=0)
    scale = Scale(fail_on=3, fail_text="café ✓", delivery=policy, name="scale")(numbers)
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(scale)
    return Flow([sink], flow_type=BATCH, flow_id="accented")
