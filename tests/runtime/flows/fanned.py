"""REALTIME with a finite source: numbers → relay (2 competing replicas, a Deployment in
the cluster, so its pods have no ordinal of their own) → sink."""

import os

from testnodes import Numbers, Record, Scale

from vf import REALTIME, Flow


def build_flow() -> Flow:
    numbers = Numbers(count=30, interval=0.01, name="numbers")
    relay = Scale(factor=1, nb_tasks=2, name="relay")(numbers)
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(relay)
    return Flow([sink], flow_type=REALTIME, flow_id="fanned")
