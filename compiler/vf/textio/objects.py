"""The one name for a Kubernetes object as vf builds, reads and writes it: a mapping of
JSON-shaped values (``Obj``)."""

from typing import Any

Obj = dict[str, Any]
