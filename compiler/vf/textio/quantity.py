"""Kubernetes storage quantities (``10Gi``, ``500M``) as numbers of bytes."""

from __future__ import annotations

import re
from typing import Any

_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([KMGTPE]i?)?\Z")
_FACTORS = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_FACTORS |= {f"{k}i": 1024 ** (i + 1) for i, k in enumerate("KMGTPE")}


def quantity_bytes(text: Any) -> float | None:
    """A storage quantity (``10Gi``, ``500M``) in bytes; None when it is not one."""
    match = _QUANTITY.match(str(text))
    if match is None:
        return None
    return float(match.group(1)) * _FACTORS[match.group(2) or ""]
