"""Keep credentials out of logs: service URLs may carry a user, password or token."""

from __future__ import annotations

import re

_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s,]+@")
_PASSWORD_QUERY = re.compile(r"(?i)\b(password=)[^&\s,]+")


def redact(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``."""
    return _PASSWORD_QUERY.sub(r"\1***", _USERINFO.sub(r"\g<scheme>***@", text))
