"""BATCH: two competing replicas of a processor, one of whose calls never returns."""

import os

from testnodes import Numbers, Record, Scale

from vf import BATCH, DeliveryPolicy, Flow


def build_flow() -> Flow:
    numbers = Numbers(count=int(os.environ.get("VF_TEST_COUNT", "400")), name="numbers")
    bounded = DeliveryPolicy(call_timeout_seconds=float(os.environ["VF_TEST_CALL_TIMEOUT"]))
    scale = Scale(
        hang_on=int(os.environ.get("VF_TEST_HANG_ON", "150")),
        hang_marker=os.environ["VF_TEST_HANG_MARKER"],
        delivery=bounded,
        nb_tasks=2,
        name="scale",
    )(numbers)
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(scale)
    return Flow([sink], flow_type=BATCH, flow_id="hung")
