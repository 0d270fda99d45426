"""Keep credentials out of logs: service URLs may carry a user, password or token."""

from __future__ import annotations

import re

_SCHEME = r"\b[A-Za-z][A-Za-z0-9+.-]*://"
# A URL runs from its scheme to the next whitespace, or to a comma that starts the next URL
# of a list (``nats://a:1,nats://b:2``); a comma inside a password does not end it.
_URL = re.compile(rf"(?P<scheme>{_SCHEME})(?P<rest>(?:(?!,{_SCHEME})\S)+)")
_PASSWORD_QUERY = re.compile(r"(?i)\b(password=)[^&\s,]+")


def _hide_userinfo(match: re.Match[str]) -> str:
    # The host never holds an ``@`` but a password may, unencoded (``u:p@ss@host``): the
    # userinfo runs to the last ``@``. A path with an ``@`` in it is hidden as well, which
    # shows less than it could and never more.
    rest = match["rest"]
    at = rest.rfind("@")
    if at <= 0:
        return match[0]
    return f"{match['scheme']}***{rest[at:]}"


def redact(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``."""
    return _PASSWORD_QUERY.sub(r"\1***", _URL.sub(_hide_userinfo, text))
