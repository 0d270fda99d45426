"""BATCH: numbers → sink, each recording the garbage collector's frozen count (ADR 0242)."""

import os

from testnodes import HeapNumbers, HeapRecord

from vf import BATCH, Flow


def build_flow() -> Flow:
    numbers = HeapNumbers(count=20, name="numbers")
    sink = HeapRecord(path=os.environ["VF_TEST_OUT"], name="sink")(numbers)
    return Flow([sink], flow_type=BATCH, flow_id="heap")
