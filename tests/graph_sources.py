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
