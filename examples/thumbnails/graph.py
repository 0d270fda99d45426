"""REALTIME example with a native component: a live frame source, a GPU thumbnailer that is
not a Python class of this project (components/thumbnailer/component.yaml), and a store."""

from thumbnail_nodes import FrameSource, ThumbnailStore

from vf import REALTIME, Flow, component


def build_flow() -> Flow:
    frames = FrameSource(width=1920, height=1080, name="frames")
    thumbnailer = component(
        "components/thumbnailer/component.yaml",
        params={"width": 320, "format": "jpeg"},
        nb_tasks=2,
    )
    thumbs = thumbnailer(frames)
    store = ThumbnailStore(directory="/archive/thumbs", name="store")(thumbs)
    return Flow([store], flow_type=REALTIME, flow_id="thumbnails")
