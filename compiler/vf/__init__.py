"""vf: a declarative pipeline compiler that emits GitOps artifacts.

Graph modules import the authoring API from here; it lives in ``vf_runtime`` so
that workers can run the same classes without the compiler.
"""

from vf_runtime import (
    BATCH,
    CPU,
    GPU,
    REALTIME,
    Consumer,
    DeliveryPolicy,
    Flow,
    JoinPolicy,
    Processor,
    Producer,
)

__version__ = "0.1.0"

__all__ = [
    "BATCH",
    "CPU",
    "GPU",
    "REALTIME",
    "Consumer",
    "DeliveryPolicy",
    "Flow",
    "JoinPolicy",
    "Processor",
    "Producer",
    "__version__",
]
