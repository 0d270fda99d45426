"""BATCH: count → a consumer that needs more memory than its limit (vf.yaml: 128Mi)."""

from podman_nodes import Count, Hog

from vf import BATCH, Flow


def build_flow() -> Flow:
    sink = Hog(name="hog")(Count(name="count"))
    return Flow([sink], flow_type=BATCH, flow_id="podman-hog")
