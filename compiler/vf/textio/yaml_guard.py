"""Bounds on the YAML vf reads from users: size, and what aliases may expand to.

A YAML alias repeats a node without repeating its text, so nine nested aliases in a
few hundred bytes stand for a billion values; whatever walks the loaded document
(validation, JSON conversion) would run for hours. vf counts the values a document
stands for, each shared node once per use, and refuses a document whose aliases make
it larger than its own text could spell out.
"""

from __future__ import annotations

from typing import Any

MAX_INPUT_BYTES = 1024 * 1024
_MIN_NODES = 10_000


def too_large(size: int) -> bool:
    return size > MAX_INPUT_BYTES


def amplified(document: Any, *, text_length: int) -> bool:
    """Whether aliases make ``document`` stand for more values than its text could hold,
    or one holds itself (an alias inside its own anchor)."""
    limit = max(_MIN_NODES, text_length)
    sizes: dict[int, int] = {}
    ancestors: set[int] = set()
    stack: list[tuple[Any, bool]] = [(document, False)]
    while stack:
        node, done = stack.pop()
        if not isinstance(node, dict | list):
            continue
        key = id(node)
        children = list(node.values()) if isinstance(node, dict) else node
        if done:
            ancestors.discard(key)
            sizes[key] = 1 + sum(
                sizes[id(c)] if isinstance(c, dict | list) else 1 for c in children
            )
            if sizes[key] > limit:
                return True
        elif key in ancestors:
            return True
        elif key not in sizes:
            ancestors.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in children)
    return False
