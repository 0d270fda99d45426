"""GPU example: MIG-sized sharers (embedder, detector) and a whole-card spanner (reranker)."""

from video_nodes import ClipReader, Detector, Embedder, IndexWriter, Reranker

from vf import BATCH, GPU, Flow


def build_flow() -> Flow:
    clips = ClipReader(count=500)
    embedder = Embedder(dims=512, nb_tasks=3, device_type=GPU, gpu_memory_gib=9)(clips)
    detector = Detector(nb_tasks=2, device_type=GPU, gpu_memory_gib=18)(clips)
    reranker = Reranker(
        nb_tasks=2, partition_by="trace_id", device_type=GPU, gpu_count=2
    )(embedder, detector)
    return Flow([IndexWriter()(reranker)], flow_type=BATCH, flow_id="video-analytics")
