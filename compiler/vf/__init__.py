"""vf: a declarative pipeline compiler that emits GitOps artifacts.

Graph modules import the authoring API from here; it lives in ``vf_runtime`` so
that workers can run the same classes without the compiler.
"""

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from vf.components import component


def __getattr__(name: str) -> Any:
    # ``component`` pulls in descriptor validation; load it only when a graph uses it,
    # so that ``vf --version`` and plain graphs start fast.
    if name == "component":
        from vf.components import component

        return component
    raise AttributeError(f"module 'vf' has no attribute {name!r}")


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
    "component",
]
