"""BATCH diamond: numbers → left, right → pair (2 partitioned replicas) → sink."""

import os

from testnodes import Numbers, Pair, Record, Scale

from vf import BATCH, Flow


def build_flow() -> Flow:
    numbers = Numbers(count=30, name="numbers")
    left = Scale(factor=2, name="left")(numbers)
    right = Scale(factor=3, name="right")(numbers)
    pair = Pair(nb_tasks=2, partition_by="trace_id", name="pair")(left, right)
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(pair)
    return Flow([sink], flow_type=BATCH, flow_id="joins")
