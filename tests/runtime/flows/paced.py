"""BATCH, paced like a live source: replayed numbers at 4 items/s → scale → idempotent sink.

The producer is replayable, so every run mints the same message ids: only run
generations keep one run's idempotency records and streams from another's.
"""

import os

from testnodes import Record, ReplayedNumbers, Scale

from vf import BATCH, Flow


def build_flow() -> Flow:
    count = int(os.environ.get("VF_TEST_COUNT", "12"))
    numbers = ReplayedNumbers(count=count, interval=0.25, name="numbers")
    replicas = int(os.environ.get("VF_TEST_SCALE_REPLICAS", "1"))  # >1: competing replicas
    late = float(os.environ.get("VF_TEST_SCALE_OPEN_DELAY", "0"))
    scale = Scale(factor=2, nb_tasks=replicas, open_delay=late, name="scale")(numbers)
    sink = Record(path=os.environ["VF_TEST_OUT"], idempotent=True, name="sink")(scale)
    return Flow([sink], flow_type=BATCH, flow_id="paced")
