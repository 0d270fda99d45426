"""BATCH: numbers → double (two replicas) → idempotent sink; shaped by VF_TEST_* at compile."""

import os

from tree_nodes import Double, Numbers, Record

from vf import BATCH, Flow


def build_flow() -> Flow:
    numbers = Numbers(
        count=int(os.environ.get("VF_TEST_COUNT", "30")),
        interval=float(os.environ.get("VF_TEST_INTERVAL", "0")),
        tag=os.environ.get("VF_TEST_TAG", ""),
        name="numbers",
    )
    double = Double(nb_tasks=2, name="double")(numbers)
    if os.environ.get("VF_TEST_EXTRA"):  # a changed graph: one more stage, a new run
        double = Double(name="again")(double)
    sink = Record(
        path=os.environ["VF_TEST_OUT"],
        refuse=int(os.environ.get("VF_TEST_REFUSE", "0")),
        idempotent=True,
        name="sink",
    )(double)
    return Flow([sink], flow_type=BATCH, flow_id=os.environ.get("VF_TEST_FLOW", "tree-batch"))
