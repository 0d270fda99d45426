"""BATCH: count → a consumer whose module imports a package the image lacks."""

from lacking_nodes import Templated
from podman_nodes import Count

from vf import BATCH, Flow


def build_flow() -> Flow:
    sink = Templated(name="templated")(Count(name="count"))
    return Flow([sink], flow_type=BATCH, flow_id="podman-lacking")
