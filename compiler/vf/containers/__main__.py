"""``python -m vf.containers [--gpu] [--app DIR --tag REF]``: build vf's images.

Builds, with podman, the Debian base and the worker image (each once per digest of its
inputs); with ``--gpu`` the GPU image's Python layer (docker/Dockerfile.gpu on the Debian
base instead of CUDA's); with ``--app`` the pipeline image from that folder; with
``--prune`` removes vf's older base and worker tags. Prints each reference. scripts/build-images
runs this. Exit codes as vf's: 2 for the app's own build failing, 3 for the machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from vf.containers.build import (
    GPU_PYTHON,
    ensure_base_image,
    ensure_image,
    ensure_pipeline_image,
    ensure_worker_image,
    prune_superseded,
)
from vf.containers.engine import require_podman
from vf.errors import VfError


def _log(line: str) -> None:
    print(f"vf images: {line}", file=sys.stderr, flush=True)


def build(app: Path | None, tag: str | None, *, gpu: bool = False) -> list[tuple[str, str, float]]:
    """(role, reference, seconds) of each image, built where local storage lacks it."""
    podman = require_podman()
    made: list[tuple[str, str, float]] = []
    started = time.perf_counter()
    base = ensure_base_image(podman, log=_log)
    made.append(("base", base, time.perf_counter() - started))
    started = time.perf_counter()
    worker = ensure_worker_image(podman, log=_log)
    made.append(("worker", worker, time.perf_counter() - started))
    if gpu:
        started = time.perf_counter()
        made.append(
            ("gpu", ensure_image(podman, GPU_PYTHON, log=_log), time.perf_counter() - started)
        )
    if app is not None:
        reference = tag or f"localhost/{app.resolve().name}:dev"
        started = time.perf_counter()
        ensure_pipeline_image(podman, tag=reference, app_dir=app, log=_log)
        made.append(("pipeline", reference, time.perf_counter() - started))
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/build-images", description=__doc__)
    parser.add_argument(
        "--app", type=Path, help="a pipeline's folder (its Dockerfile, or vf init's)"
    )
    parser.add_argument(
        "--tag", help="the pipeline image's reference (default localhost/<folder>:dev)"
    )
    parser.add_argument(
        "--gpu", action="store_true", help="also docker/Dockerfile.gpu's Python layer (no CUDA)"
    )
    parser.add_argument(
        "--prune", action="store_true", help="remove older tags of the images built"
    )
    options = parser.parse_args(argv)
    if options.tag and options.app is None:
        parser.error("--tag names the pipeline image: pass --app too")
    try:
        made = build(options.app, options.tag, gpu=options.gpu)
        if options.prune:
            prune_superseded(require_podman(), {ref for _, ref, _ in made}, log=_log)
    except VfError as error:
        print(error.render(), file=sys.stderr)
        return error.exit_code
    for role, reference, seconds in made:
        print(f"{role:<9} {reference}  ({seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
