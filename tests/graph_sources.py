"""Source text of the small node classes that many tests' throwaway graph modules share."""

NODES = """
from vf import BATCH, GPU, REALTIME, Consumer, DeliveryPolicy, Flow, JoinPolicy, Processor, Producer


class Src(Producer):
    def next(self):
        raise StopIteration


class Work(Processor):
    def process(self, x):
        return x


class Sink(Consumer):
    def consume(self, x):
        pass
"""


# an endless source, one processor and a sink, REALTIME; ``.format(flow_id=...)``
LIVE_CHAIN = """
from vf import REALTIME, Consumer, Flow, Processor, Producer


class Src(Producer):
    def next(self):
        return 1


class Work(Processor):
    def process(self, x):
        return x


class Sink(Consumer):
    def consume(self, x):
        pass


def build_flow():
    work = Work(name="work")(Src(name="src"))
    return Flow([Sink(name="sink")(work)], flow_type=REALTIME, flow_id="{flow_id}")
"""
