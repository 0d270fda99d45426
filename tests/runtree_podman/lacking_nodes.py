"""A node module that imports a package the compiler has and the worker image lacks."""

from __future__ import annotations

from typing import Any

import jinja2  # noqa: F401  (the compiler's dependency, not the worker image's)

from vf import Consumer


class Templated(Consumer):
    def consume(self, item: dict[str, Any]) -> None:
        return None
