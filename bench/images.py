"""Build vf's images with podman, cold and warm; results go to bench/results/images.json.

*Cold*: a podman storage of its own in a temporary folder (the machine's images and layer
cache untouched, and not used): the Debian base (mmdebstrap and ``podman import``), the
worker image (docker/Dockerfile, pip fetching from the index) and a pipeline image (the
Dockerfile ``vf init`` writes, FROM the worker image) and docker/Dockerfile.gpu's Python
layer on the Debian base, each timed. *Warm*: the same three
calls again on that storage (each finds its tag), then a pipeline image rebuilt after its
node module changed (podman's layer cache keeps everything above the COPY). Sizes are
podman's (all layers, uncompressed). The temporary storage is removed at the end.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "compiler"), str(ROOT / "runtime")]

from vf.commands.scaffold import init_project  # noqa: E402
from vf.containers.build import (  # noqa: E402
    GPU_PYTHON,
    ensure_base_image,
    ensure_image,
    ensure_pipeline_image,
    ensure_worker_image,
)
from vf.containers.engine import Podman, require_podman  # noqa: E402

PIPELINE = "localhost/vf-bench:pipeline"


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return round(time.perf_counter() - start, 2)


def _round(podman: Podman, app: Path) -> dict[str, float]:
    def quiet(_line: str) -> None:
        pass

    return {
        "base": _timed(lambda: ensure_base_image(podman, log=quiet)),
        "worker": _timed(lambda: ensure_worker_image(podman, log=quiet)),
        "pipeline": _timed(
            lambda: ensure_pipeline_image(podman, tag=PIPELINE, app_dir=app, log=quiet)
        ),
        "gpu_python": _timed(lambda: ensure_image(podman, GPU_PYTHON, log=quiet)),
    }


def measure(podman: Podman, work: Path) -> dict[str, object]:
    app = work / "app"
    init_project(app)
    (app / "Dockerfile").unlink()  # the Dockerfile vf init writes, rendered by the build
    cold = _round(podman, app)
    warm = _round(podman, app)
    nodes = app / "app_nodes.py"
    nodes.write_text(nodes.read_text() + "\n# changed\n")
    warm["pipeline_after_a_node_change"] = _timed(
        lambda: ensure_pipeline_image(podman, tag=PIPELINE, app_dir=app, log=lambda _: None)
    )
    refs = {
        "base": ensure_base_image(podman, log=print),
        "worker": ensure_worker_image(podman, log=print),
        "pipeline": PIPELINE,
        "gpu_python": ensure_image(podman, GPU_PYTHON, log=print),
    }
    return {
        "cold_seconds": cold,
        "warm_seconds": warm,
        "size_mb": {name: round(podman.image_size(ref) / 1e6, 1) for name, ref in refs.items()},
    }


def main() -> None:
    podman = require_podman()
    with tempfile.TemporaryDirectory(prefix="vf-bench-images-", dir="/var/tmp") as scratch:
        own = podman.with_storage(Path(scratch) / "storage")
        try:
            figures = measure(own, Path(scratch))
        finally:
            own.run(["rmi", "--all", "--force"], timeout=300)
            shutil.rmtree(Path(scratch) / "storage", ignore_errors=True)
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "podman_runtime": podman.runtime,
        **figures,
    }
    out = ROOT / "bench" / "results" / "images.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
