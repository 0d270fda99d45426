"""REALTIME example: two live cameras, a replicated detector, a partitioned tracker."""

from camera_nodes import AlertSink, CameraFeed, Detector, Tracker

from vf import GPU, REALTIME, Flow, JoinPolicy


def build_flow() -> Flow:
    front = CameraFeed(camera="front", name="cam-front")
    back = CameraFeed(camera="back", name="cam-back")
    detector = Detector(threshold=0.6, nb_tasks=2, device_type=GPU)(front)
    tracker = Tracker(
        nb_tasks=3,
        partition_by="camera",
        join_policy=JoinPolicy(timeout_seconds=2.0, missing="drop"),
    )(detector, back)
    alerts = AlertSink(name="alerts")(tracker)
    return Flow([alerts], flow_type=REALTIME, flow_id="cameras")
