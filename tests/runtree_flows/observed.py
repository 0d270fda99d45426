"""REALTIME, for a Prometheus to watch: an endless paced source → a processor of two
replicas → a sink, each of the two refusing one item in fifty (different ones), so that
every row of the flow's dashboard has something to draw and dead letters keep coming."""

import os

from tree_nodes import Numbers, Picky, PickyRecord

from vf import REALTIME, Flow


def build_flow() -> Flow:
    numbers = Numbers(count=0, interval=0.05, is_finite=False, name="numbers")
    double = Picky(every=50, rest=0, nb_tasks=2, name="double")(numbers)
    sink = PickyRecord(path=os.environ["VF_TEST_OUT"], every=50, rest=25, name="sink")(double)
    return Flow([sink], flow_type=REALTIME, flow_id="tree-observed")
