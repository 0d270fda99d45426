"""BATCH: numbers → scale (two competing replicas, one may crash once) → idempotent sink."""

import os

from testnodes import Numbers, Record, Scale

from vf import BATCH, Flow


def build_flow() -> Flow:
    numbers = Numbers(count=int(os.environ.get("VF_TEST_COUNT", "40")), name="numbers")
    scale = Scale(
        factor=2,
        crash_at=int(os.environ.get("VF_TEST_CRASH_AT", "0")),
        crash_marker=os.environ.get("VF_TEST_MARKER", ""),
        nb_tasks=2,
        name="scale",
    )(numbers)
    sink = Record(path=os.environ["VF_TEST_OUT"], idempotent=True, name="sink")(scale)
    return Flow([sink], flow_type=BATCH, flow_id=os.environ.get("VF_TEST_FLOW", "linear"))
