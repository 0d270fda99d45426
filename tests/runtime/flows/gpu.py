"""BATCH with a GPU processor on three replicas: each reports its local GPU grant."""

import os

from gpunodes import GrantProbe
from testnodes import Numbers, Record

from vf import BATCH, GPU, Flow


def build_flow() -> Flow:
    numbers = Numbers(count=30, name="numbers")
    probe = GrantProbe(nb_tasks=3, device_type=GPU, name="probe")(numbers)
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(probe)
    return Flow([sink], flow_type=BATCH, flow_id=os.environ.get("VF_TEST_FLOW", "gpu"))
