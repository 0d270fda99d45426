"""What to write instead, for the vf.yaml schema errors whose generic wording does not say.

jsonschema words a problem after the rule it broke (``1.3 is not of type 'string'``, ``is
not valid under any of the given schemas``); here two common ones become a sentence that
names the value as the user wrote it and the text to write instead.
"""

from __future__ import annotations

import re
from typing import Any

QUANTITY_FORMS = (
    "a number with one of Kubernetes' suffixes: memory as 256Mi, 1Gi or 512M "
    "(Ki Mi Gi Ti Pi Ei count in 1024s, k M G T P E in 1000s), CPU as 500m or 2"
)
# 256MB, 1 GiB, 512mb: a unit written the way file sizes are, not as a Kubernetes quantity
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgtpe])(i?)b?\s*$", re.IGNORECASE)


def schema_hint(
    error: Any, *, location: str, line: str | None, quantity: Any
) -> tuple[str, str] | None:
    """``(what, fix)`` for ``error`` (a ``jsonschema.ValidationError``) where vf can say
    more than its rule, else None. ``line`` is the source line of the value; ``quantity``
    is the schema of a Kubernetes quantity."""
    value = error.instance
    if error.validator == "oneOf" and error.schema == quantity:
        return f"{location}: {value!r} is not a Kubernetes quantity", _quantity_fix(value)
    expected = error.validator_value if error.validator == "type" else None
    wants_text = expected == "string" or (isinstance(expected, list) and "string" in expected)
    if wants_text and isinstance(value, bool | int | float):
        key = error.absolute_path[-1] if error.absolute_path else None
        raw = _written(line, key) if isinstance(key, str) else None
        written = raw or _plain(value)
        kind = "true/false" if isinstance(value, bool) else "a number"
        read = f"{kind} ({_plain(value)})" if _plain(value) != written else kind
        what = f"{location}: YAML reads {written} as {read}, not as text"
        where = f"{key}: " if isinstance(key, str) else ""
        return what, f'put it in quotes: {where}"{written}"'
    return None


_UNITS = {
    "K": ("kibibytes", "kilobytes"),
    "M": ("mebibytes", "megabytes"),
    "G": ("gibibytes", "gigabytes"),
    "T": ("tebibytes", "terabytes"),
    "P": ("pebibytes", "petabytes"),
    "E": ("exbibytes", "exabytes"),
}


def _quantity_fix(value: Any) -> str:
    general = f"write {QUANTITY_FORMS}"
    match = _SIZE.match(value) if isinstance(value, str) else None
    if match is None:
        return general
    number, unit = match.group(1), match.group(2).upper()
    binary, decimal = _UNITS[unit]
    said = f"{number}{unit}i ({binary})"
    if not match.group(3):  # 256MB: either may be meant
        said += f" or {number}{'k' if unit == 'K' else unit} ({decimal})"
    return f"for {value!r} write {said}; a quantity is {QUANTITY_FORMS}"


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _written(line: str | None, key: str) -> str | None:
    """The value of ``key`` as the line writes it (``1.30``, not the number 1.3)."""
    if line is None:
        return None
    found = re.search(rf"(?:^|[\s{{,]){re.escape(key)}['\"]?\s*:\s+([^\s,#}}\]][^,#}}\]]*)", line)
    return found.group(1).strip() if found else None
