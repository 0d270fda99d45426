"""REALTIME overload: a fast finite camera into a slow stage; freshest items win."""

import os

from testnodes import Numbers, Record, Scale

from vf import REALTIME, Flow


def build_flow() -> Flow:
    numbers = Numbers(count=60, interval=0.005, name="numbers")
    slow = Scale(delay=0.05, name="slow")(numbers)
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(slow)
    return Flow([sink], flow_type=REALTIME, flow_id="overload")
