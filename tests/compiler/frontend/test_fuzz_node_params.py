"""Parameter capture: the cached binder gives exactly what ``inspect`` binding gives.

A node records its constructor arguments by name so a worker can rebuild it. The binder
caches each ``__init__``'s shape instead of calling ``inspect.signature`` per node; these
tests generate signatures of every parameter kind and calls that fit them or not, and
require the same parameters, in the same order, as binding with ``inspect`` each time.
"""

from __future__ import annotations

import inspect
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from vf import Processor
from vf_runtime.nodes import bind_params, bind_params_slowly

NAMES = ["a", "b", "c", "d", "e"]


@st.composite
def signatures(draw: st.DrawFn) -> str:
    """The source of an ``__init__`` with a random mix of parameter kinds."""
    names = iter(draw(st.permutations(NAMES)))
    positional_only = [next(names) for _ in range(draw(st.integers(0, 1)))]
    positional = [next(names) for _ in range(draw(st.integers(0, 2)))]
    keyword_only = [next(names) for _ in range(draw(st.integers(0, 2)))]
    first_default = draw(st.integers(0, len(positional_only) + len(positional)))
    parts = ["self"]
    for index, name in enumerate(positional_only + positional):
        parts.append(f"{name}=0" if index >= first_default else name)
        if positional_only and index == len(positional_only) - 1:
            parts.append("/")
    if draw(st.booleans()):
        parts.append("*rest")
    elif keyword_only:
        parts.append("*")
    parts.extend(f"{name}=1" if draw(st.booleans()) else name for name in keyword_only)
    if draw(st.booleans()):
        parts.append("**extra")
    return f"def __init__({', '.join(parts)}):\n    pass\n"


def make_class(source: str) -> type:
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # the generated signature under test
    return type("Generated", (), {"__init__": namespace["__init__"]})


@settings(max_examples=300, deadline=None)
@given(
    source=signatures(),
    args=st.lists(st.integers(0, 9), max_size=4),
    keys=st.lists(st.sampled_from([*NAMES, "self", "rest", "extra", "other"]), unique=True),
)
def test_the_cached_binder_matches_inspect(source: str, args: list[int], keys: list[str]) -> None:
    cls = make_class(source)
    kwargs = {key: f"v-{key}" for key in keys}
    fast = bind_params(cls, tuple(args), kwargs)
    slow = bind_params_slowly(inspect.signature(cls.__init__), tuple(args), kwargs)  # type: ignore[misc]
    assert list(fast.items()) == list(slow.items())


def test_nodes_still_record_their_constructor_arguments() -> None:
    class Scale(Processor):
        def __init__(self, factor: float, *extra: int, label: str = "x", **kw: Any) -> None:
            super().__init__(**kw)
            self.factor = factor

    node = Scale(2.5, 7, 8, label="y", name="scale", nb_tasks=2)
    assert node.get_params() == {
        "factor": 2.5,
        "*extra": [7, 8],
        "label": "y",
        "name": "scale",
        "nb_tasks": 2,
    }
    assert node._vf_site is not None and node._vf_site[0] == __file__
