"""BATCH example: a producer fans out to two processors whose outputs are joined."""

from batch_nodes import Merge, RecordReader, ResultStore, Scale

from vf import BATCH, Flow


def build_flow() -> Flow:
    reader = RecordReader(count=1000)
    double = Scale(factor=2, name="double")(reader)
    triple = Scale(factor=3, name="triple")(reader)
    merge = Merge(nb_tasks=2, partition_by="trace_id")(double, triple)
    store = ResultStore(path="/tmp/results.jsonl", idempotent=True)(merge)
    return Flow([store], flow_type=BATCH)
