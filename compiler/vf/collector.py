"""Pausing Python's cyclic garbage collector around work that makes no garbage cycles.

Importing the compiler and compiling build many small, long-lived, acyclic objects; with
the collector on, each growth step of a large heap sets off a collection that rescans all
of them and frees nothing. The one helper, used where that work is entered: the compile
(``vf.pipeline``) and the command line's import of the compiler (``vf.cli``). The forked
graph loader and the ``vf`` executable after a compile disable it outright: each is a
process about to end.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Disable the cyclic collector for the block; enable it after only if it was on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
