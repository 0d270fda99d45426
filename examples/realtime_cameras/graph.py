"""REALTIME example: two live cameras; a replicated GPU detector and a partitioned tracker on
the front camera, an archiver on the back camera."""

from camera_nodes import AlertSink, Archiver, CameraFeed, Detector, Tracker

from vf import GPU, REALTIME, Flow


def build_flow() -> Flow:
    front = CameraFeed(camera="front", name="cam-front")
    back = CameraFeed(camera="back", name="cam-back")
    detector = Detector(threshold=0.6, nb_tasks=2, device_type=GPU)(front)
    tracker = Tracker(nb_tasks=3, partition_by="trace_id")(detector)
    alerts = AlertSink(name="alerts")(tracker)
    archive = Archiver(name="archive")(back)
    return Flow([alerts, archive], flow_type=REALTIME, flow_id="cameras")
