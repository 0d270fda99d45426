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
    from vf.frontend.components import component


def __getattr__(name: str) -> Any:
    # ``component`` pulls in descriptor validation; load it only when a graph uses it,
    # so that ``vf --version`` and plain graphs start fast.
    if name == "component":
        try:
            from vf.frontend.components import component
        except ModuleNotFoundError as exc:
            if exc.name not in ("vf.frontend", "vf.frontend.components"):
                raise
            # The worker-only distribution (vf-gitops-worker) ships this file and
            # vf_runtime, not the compiler: say so instead of a bare import error.
            raise ImportError(
                "vf.component is part of the compiler, which this installation does not "
                "hold (it is the worker-only distribution vf-gitops-worker): declare "
                "components in graph modules and compile them where vf-gitops is installed "
                "(pip install vf-gitops)",
                name="vf.frontend.components",
            ) from None
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
