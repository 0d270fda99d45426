"""Time the node constructor binder against ``inspect.Signature.bind`` with a per-class cache.

5,000 constructor calls of three shapes (keywords only; a positional, ``*args`` and
keywords; a subclass's own keywords with ``**kw``), as a graph's nodes make them, are
bound by ``vf_runtime.nodes.bind_params`` (vf's binder, a per-function shape cache) and by
``Signature.bind`` on a signature cached per class (``bind_params_slowly``), in turn,
``--repeat`` rounds. Prints the median and minimum of each, in milliseconds per 5,000.

Usage: ``python bench/bind.py [--repeat 25]``
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import time
from collections.abc import Callable
from typing import Any

from vf_runtime.nodes import Processor, Producer, bind_params, bind_params_slowly

Call = tuple[type, tuple[Any, ...], dict[str, Any]]


class Source(Producer):
    def __init__(self, start_value: int = 0, end_value: int = 99, **kw: Any) -> None:
        super().__init__(**kw)

    def next(self) -> int:
        raise StopIteration


class Identity(Processor):
    def process(self, item: Any) -> Any:
        return item


class Join(Processor):
    def __init__(self, key: str, *extra: Any, weight: float = 1.0, **kw: Any) -> None:
        super().__init__(**kw)

    def process(self, left: Any, right: Any) -> Any:
        return left


def calls(count: int) -> list[Call]:
    made: list[Call] = []
    for i in range(count):
        if i % 10 < 7:
            made.append((Identity, (), {"name": f"p-{i}", "nb_tasks": 2}))
        elif i % 10 < 9:
            made.append((Join, ("key",), {"name": f"j-{i}", "weight": 2.0}))
        else:
            made.append((Source, (), {"start_value": 0, "end_value": 9, "name": f"s-{i}"}))
    return made


_SIGNATURES: dict[type, inspect.Signature] = {}


def bind_with_inspect(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    signature = _SIGNATURES.get(cls)
    if signature is None:
        signature = _SIGNATURES[cls] = inspect.signature(cls.__init__)  # type: ignore[misc]
    return bind_params_slowly(signature, args, kwargs)


def _time(binder: Callable[..., dict[str, Any]], made: list[Call]) -> float:
    start = time.perf_counter()
    for cls, args, kwargs in made:
        binder(cls, args, kwargs)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=25)
    parser.add_argument("--nodes", type=int, default=5000)
    args = parser.parse_args()
    made = calls(args.nodes)
    for cls, positional, keywords in made[:10]:
        assert bind_params(cls, positional, keywords) == bind_with_inspect(
            cls, positional, keywords
        )
    found: dict[str, list[float]] = {"vf's binder": [], "Signature.bind, cached": []}
    for _ in range(args.repeat):
        found["vf's binder"].append(_time(bind_params, made))
        found["Signature.bind, cached"].append(_time(bind_with_inspect, made))
    for label, samples in found.items():
        print(
            f"{label}: median {statistics.median(samples) * 1000:.1f} ms, "
            f"min {min(samples) * 1000:.1f} ms per {args.nodes} nodes"
        )


if __name__ == "__main__":
    main()
