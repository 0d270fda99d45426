"""vf's worker runtime and the authoring classes that graph modules subclass."""

from vf_runtime.constants import BATCH, CPU, GPU, REALTIME
from vf_runtime.errors import AuthoringError
from vf_runtime.flow import Flow
from vf_runtime.nodes import Consumer, Node, Processor, Producer
from vf_runtime.policies import DeliveryPolicy, JoinPolicy

__all__ = [
    "BATCH",
    "CPU",
    "GPU",
    "REALTIME",
    "AuthoringError",
    "Consumer",
    "DeliveryPolicy",
    "Flow",
    "JoinPolicy",
    "Node",
    "Processor",
    "Producer",
]
