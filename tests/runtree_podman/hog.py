"""BATCH: count → a consumer that needs more memory than its limit (hog.yaml: 128Mi).

Six items for the Job's four tries (backoffLimit 3): each life is handed an item nobody
holds, instead of the fourth waiting out the ack wait of one a killed life held."""

from podman_nodes import Count, Hog

from vf import BATCH, Flow


def build_flow() -> Flow:
    sink = Hog(name="hog")(Count(count=6, name="count"))
    return Flow([sink], flow_type=BATCH, flow_id="podman-hog")
