"""REALTIME: an endless paced source → double (two replicas) → sink."""

import os

from tree_nodes import CrashingDouble, Double, Numbers, Record

from vf import REALTIME, Flow


def build_flow() -> Flow:
    numbers = Numbers(count=0, interval=0.02, is_finite=False, name="numbers")
    stage = os.environ.get("VF_TEST_STAGE", "double")
    crash = float(os.environ.get("VF_TEST_CRASH_AFTER", "0"))  # > 0: it crash-loops
    if crash:  # one replica: a restarted one need not wait for its leased ordinal (ENV-6)
        double = CrashingDouble(after=crash, name=stage)(numbers)
    else:
        double = Double(nb_tasks=2, name=stage)(numbers)
    delay = float(os.environ.get("VF_TEST_OPEN_DELAY", "0"))  # > 0: a sink slow to be ready
    sink = Record(path=os.environ["VF_TEST_OUT"], open_delay=delay, name="sink")(double)
    return Flow([sink], flow_type=REALTIME, flow_id=os.environ.get("VF_TEST_FLOW", "tree-live"))
