"""What a node's constructor arguments may hold: JSON that a worker can parse back.

A worker rebuilds each node as ``cls(**params)`` from one JSON environment variable, so
the compiler refuses, by name, any value that JSON would change, drop or fail to encode
and any structure a parser would refuse (too deep, too large, unpaired surrogates).
"""

from __future__ import annotations

import math
import re

MAX_PARAM_DEPTH = 100
MAX_PARAM_ITEMS = 250_000
MAX_INT_BITS = 4096  # well inside the 4300 decimal digits int() accepts back
_SURROGATE = re.compile("[\ud800-\udfff]")


def json_problem(value: object, path: str) -> str | None:
    """What JSON cannot carry faithfully (or a worker could not parse back), or None.

    Iterative, and bounded in depth and in size, so a cyclic, deeply nested or shared
    structure is reported instead of exhausting the stack or the memory.
    """
    stack: list[tuple[object, str, int]] = [(value, path, 0)]
    budget = MAX_PARAM_ITEMS
    while stack and budget > 0:
        item, where, depth = stack.pop()
        budget -= 1
        if not isinstance(item, list | tuple | dict):
            problem = _scalar_problem(item, where)
        elif depth >= MAX_PARAM_DEPTH:
            problem = f"{where} (nested deeper than {MAX_PARAM_DEPTH} levels)"
        elif isinstance(item, dict):
            bad = [k for k in item if not isinstance(k, str)]
            problem = f"{where} key {safe_repr(bad[0])}" if bad else ""
            stack.extend((sub, f"{where}.{key}", depth + 1) for key, sub in item.items())
        else:
            problem = ""
            stack.extend((v, f"{where}[{i}]", depth + 1) for i, v in enumerate(item))
        if problem:
            return problem
    return f"{path} (more than {MAX_PARAM_ITEMS} values)" if stack else None


def _scalar_problem(item: object, where: str) -> str:
    if item is None or isinstance(item, bool):
        return ""
    if isinstance(item, str):
        return f"{where} (a string with an unpaired surrogate)" if _SURROGATE.search(item) else ""
    if isinstance(item, int):
        bits = item.bit_length()
        return f"{where} (an integer of {bits} bits)" if bits > MAX_INT_BITS else ""
    if isinstance(item, float):
        return "" if math.isfinite(item) else f"{where}={item!r}"
    return f"{where} ({type(item).__name__})"


def safe_repr(value: object, limit: int = 60) -> str:
    """``repr`` of a user's value, shortened, and never raising."""
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__} object>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
