"""BATCH: a producer that kills itself once at item ``VF_TEST_CRASH_AT`` → idempotent sink.

``VF_TEST_REPLAYABLE=1`` declares the producer replayable (MSGID-4).
"""

import os

from testnodes import CrashingNumbers, Record, ReplayedCrashingNumbers

from vf import BATCH, Flow


def build_flow() -> Flow:
    env = os.environ.get
    source = ReplayedCrashingNumbers if env("VF_TEST_REPLAYABLE") == "1" else CrashingNumbers
    numbers = source(
        count=int(env("VF_TEST_COUNT", "400")),
        crash_at=int(env("VF_TEST_CRASH_AT", "0")),
        crash_marker=env("VF_TEST_MARKER", ""),
        name="numbers",
    )
    sink = Record(path=os.environ["VF_TEST_OUT"], idempotent=True, name="sink")(numbers)
    return Flow([sink], flow_type=BATCH, flow_id=os.environ["VF_TEST_FLOW"])
