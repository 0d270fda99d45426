"""The headers of a message read back from a stream, as text.

A message read with ``JetStreamManager.get_msg`` or ``get_last_msg`` (the stream's
``MSG.GET`` API) has its header block parsed by nats-py with ``email.parser.BytesParser``:
a value holding any non-ASCII byte comes back as an ``email.header.Header`` object, whose
``str()`` is mojibake and which ``json`` cannot serialise. NATS headers are not e-mail
headers (no encoded words, no folding): vf reads the raw block itself, one ``Name: value``
line at a time, values as UTF-8, as nats-py's own client parser does for delivered
messages (nats-py 2.16, ``nats/aio/client.py``, ``_parse_header_lines``).
"""

from __future__ import annotations

import base64
import binascii
from email.header import Header, decode_header


def stored_headers(message: object) -> dict[str, str]:
    """``message``'s headers, every value as the text its publisher wrote.

    ``message`` is a ``RawStreamMsg``: its ``hdrs`` (base64 of the raw block) is read when
    present; otherwise its parsed ``headers`` are turned into text.
    """
    block = getattr(message, "hdrs", None)
    if block:
        try:
            raw = base64.b64decode(block, validate=False)
        except (binascii.Error, ValueError):
            raw = b""
        if raw:
            return parse_block(raw)
    parsed = getattr(message, "headers", None) or {}
    return {str(key): as_text(value) for key, value in parsed.items()}


def parse_block(raw: bytes) -> dict[str, str]:
    """A NATS header block (``NATS/1.0 …`` then ``Name: value`` lines) as a dict; a name
    given twice keeps its last value, as nats-py's parsers do."""
    found: dict[str, str] = {}
    for line in raw.split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if not colon:
            continue
        key = name.strip().decode("ascii", "replace")
        if key and not any(c.isspace() for c in key):
            found[key] = value.strip().decode("utf-8", "replace")
    return found


def as_text(value: object) -> str:
    """A header value as text: an ``email.header.Header`` decoded back to what its bytes
    said (UTF-8), anything else by ``str``."""
    if not isinstance(value, Header):
        return str(value)
    parts = []
    for chunk, _charset in decode_header(value):
        parts.append(chunk.decode("utf-8", "replace") if isinstance(chunk, bytes) else chunk)
    return "".join(parts)
