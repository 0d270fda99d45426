"""BATCH with a native component in the middle: numbers → tagger (2 replicas) → sink."""

import os

from testnodes import Numbers, Record

from vf import BATCH, Flow, component


def build_flow() -> Flow:
    numbers = Numbers(count=int(os.environ.get("VF_TEST_COUNT", "30")), name="numbers")
    tagger = component("components/tagger/", params={"tag": "native"}, nb_tasks=2)
    tagged = tagger(numbers)
    sink = Record(path=os.environ["VF_TEST_OUT"], name="sink")(tagged)
    return Flow([sink], flow_type=BATCH, flow_id=os.environ.get("VF_TEST_FLOW", "native"))
