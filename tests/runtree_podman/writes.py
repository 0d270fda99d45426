"""BATCH: count → a consumer that writes beside its own module."""

from podman_nodes import Count, WriteBeside

from vf import BATCH, Flow


def build_flow() -> Flow:
    sink = WriteBeside(name="beside")(Count(name="count"))
    return Flow([sink], flow_type=BATCH, flow_id="podman-writes")
