"""vf's wire: the protobuf v4 envelope, its payloads and message ids.

Input: a message's kind, ids, metadata and Python payload. Output: the envelope's
bytes, and back; the same bytes videoflow's v4 workers read.
"""

from vf_runtime.wire.codec import (
    ABORT,
    DATA,
    EOS,
    VERSION,
    Envelope,
    ErrorInfo,
    decode_envelope,
    encode_envelope,
    message_id,
)
from vf_runtime.wire.payloads import (
    BLOB_REF,
    TENSOR,
    VALUE,
    BlobRef,
    Detections,
    Frame,
    RawPayload,
    Tensor,
    Tracks,
)
from vf_runtime.wire.values import WireError, decode_payload, encode_payload

__all__ = [
    "ABORT",
    "BLOB_REF",
    "DATA",
    "EOS",
    "TENSOR",
    "VALUE",
    "VERSION",
    "BlobRef",
    "Detections",
    "Envelope",
    "ErrorInfo",
    "Frame",
    "RawPayload",
    "Tensor",
    "Tracks",
    "WireError",
    "decode_envelope",
    "decode_payload",
    "encode_envelope",
    "encode_payload",
    "message_id",
]
