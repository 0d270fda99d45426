# ruff: noqa
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MsgType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MSG_TYPE_UNSPECIFIED: _ClassVar[MsgType]
    MSG_TYPE_DATA: _ClassVar[MsgType]
    MSG_TYPE_EOS: _ClassVar[MsgType]
    MSG_TYPE_ABORT: _ClassVar[MsgType]

class NullValue(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NULL_VALUE: _ClassVar[NullValue]

class Disposition(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DISPOSITION_UNSPECIFIED: _ClassVar[Disposition]
    DISPOSITION_POISON: _ClassVar[Disposition]
    DISPOSITION_TRANSIENT: _ClassVar[Disposition]
    DISPOSITION_WORKER_FATAL: _ClassVar[Disposition]

MSG_TYPE_UNSPECIFIED: MsgType
MSG_TYPE_DATA: MsgType
MSG_TYPE_EOS: MsgType
MSG_TYPE_ABORT: MsgType
NULL_VALUE: NullValue
DISPOSITION_UNSPECIFIED: Disposition
DISPOSITION_POISON: Disposition
DISPOSITION_TRANSIENT: Disposition
DISPOSITION_WORKER_FATAL: Disposition

class Tensor(_message.Message):
    __slots__ = ("shape", "dtype", "data")
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    shape: _containers.RepeatedScalarFieldContainer[int]
    dtype: str
    data: bytes
    def __init__(
        self,
        shape: _Optional[_Iterable[int]] = ...,
        dtype: _Optional[str] = ...,
        data: _Optional[bytes] = ...,
    ) -> None: ...

class ListValue(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedCompositeFieldContainer[Value]
    def __init__(self, values: _Optional[_Iterable[_Union[Value, _Mapping]]] = ...) -> None: ...

class MapEntry(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: Value
    def __init__(
        self, key: _Optional[str] = ..., value: _Optional[_Union[Value, _Mapping]] = ...
    ) -> None: ...

class MapValue(_message.Message):
    __slots__ = ("fields",)
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.RepeatedCompositeFieldContainer[MapEntry]
    def __init__(self, fields: _Optional[_Iterable[_Union[MapEntry, _Mapping]]] = ...) -> None: ...

class Value(_message.Message):
    __slots__ = (
        "null_value",
        "double_value",
        "int_value",
        "string_value",
        "bytes_value",
        "bool_value",
        "list_value",
        "map_value",
        "tensor_value",
    )
    NULL_VALUE_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    BYTES_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    LIST_VALUE_FIELD_NUMBER: _ClassVar[int]
    MAP_VALUE_FIELD_NUMBER: _ClassVar[int]
    TENSOR_VALUE_FIELD_NUMBER: _ClassVar[int]
    null_value: NullValue
    double_value: float
    int_value: int
    string_value: str
    bytes_value: bytes
    bool_value: bool
    list_value: ListValue
    map_value: MapValue
    tensor_value: Tensor
    def __init__(
        self,
        null_value: _Optional[_Union[NullValue, str]] = ...,
        double_value: _Optional[float] = ...,
        int_value: _Optional[int] = ...,
        string_value: _Optional[str] = ...,
        bytes_value: _Optional[bytes] = ...,
        bool_value: _Optional[bool] = ...,
        list_value: _Optional[_Union[ListValue, _Mapping]] = ...,
        map_value: _Optional[_Union[MapValue, _Mapping]] = ...,
        tensor_value: _Optional[_Union[Tensor, _Mapping]] = ...,
    ) -> None: ...

class StringEntry(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = (
        "code",
        "message",
        "remedy",
        "disposition",
        "node",
        "trace_id",
        "num_delivered",
        "context",
    )
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REMEDY_FIELD_NUMBER: _ClassVar[int]
    DISPOSITION_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_DELIVERED_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    remedy: str
    disposition: Disposition
    node: str
    trace_id: str
    num_delivered: int
    context: _containers.RepeatedCompositeFieldContainer[StringEntry]
    def __init__(
        self,
        code: _Optional[str] = ...,
        message: _Optional[str] = ...,
        remedy: _Optional[str] = ...,
        disposition: _Optional[_Union[Disposition, str]] = ...,
        node: _Optional[str] = ...,
        trace_id: _Optional[str] = ...,
        num_delivered: _Optional[int] = ...,
        context: _Optional[_Iterable[_Union[StringEntry, _Mapping]]] = ...,
    ) -> None: ...

class Envelope(_message.Message):
    __slots__ = (
        "v",
        "type",
        "producer_name",
        "flow_id",
        "run_id",
        "trace_id",
        "seq",
        "event_ts",
        "span_id",
        "parent_span_id",
        "replica_id",
        "metadata",
        "payload_type",
        "payload",
        "error",
    )
    V_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_NAME_FIELD_NUMBER: _ClassVar[int]
    FLOW_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    EVENT_TS_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    v: int
    type: MsgType
    producer_name: str
    flow_id: str
    run_id: str
    trace_id: str
    seq: int
    event_ts: float
    span_id: str
    parent_span_id: str
    replica_id: int
    metadata: _containers.RepeatedCompositeFieldContainer[MapEntry]
    payload_type: str
    payload: bytes
    error: Error
    def __init__(
        self,
        v: _Optional[int] = ...,
        type: _Optional[_Union[MsgType, str]] = ...,
        producer_name: _Optional[str] = ...,
        flow_id: _Optional[str] = ...,
        run_id: _Optional[str] = ...,
        trace_id: _Optional[str] = ...,
        seq: _Optional[int] = ...,
        event_ts: _Optional[float] = ...,
        span_id: _Optional[str] = ...,
        parent_span_id: _Optional[str] = ...,
        replica_id: _Optional[int] = ...,
        metadata: _Optional[_Iterable[_Union[MapEntry, _Mapping]]] = ...,
        payload_type: _Optional[str] = ...,
        payload: _Optional[bytes] = ...,
        error: _Optional[_Union[Error, _Mapping]] = ...,
    ) -> None: ...

class Frame(_message.Message):
    __slots__ = ("pixels", "pixel_format", "capture_ts")
    PIXELS_FIELD_NUMBER: _ClassVar[int]
    PIXEL_FORMAT_FIELD_NUMBER: _ClassVar[int]
    CAPTURE_TS_FIELD_NUMBER: _ClassVar[int]
    pixels: Tensor
    pixel_format: str
    capture_ts: float
    def __init__(
        self,
        pixels: _Optional[_Union[Tensor, _Mapping]] = ...,
        pixel_format: _Optional[str] = ...,
        capture_ts: _Optional[float] = ...,
    ) -> None: ...

class Detections(_message.Message):
    __slots__ = ("boxes", "class_names")
    BOXES_FIELD_NUMBER: _ClassVar[int]
    CLASS_NAMES_FIELD_NUMBER: _ClassVar[int]
    boxes: Tensor
    class_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(
        self,
        boxes: _Optional[_Union[Tensor, _Mapping]] = ...,
        class_names: _Optional[_Iterable[str]] = ...,
    ) -> None: ...

class Tracks(_message.Message):
    __slots__ = ("tracks",)
    TRACKS_FIELD_NUMBER: _ClassVar[int]
    tracks: Tensor
    def __init__(self, tracks: _Optional[_Union[Tensor, _Mapping]] = ...) -> None: ...

class BlobRef(_message.Message):
    __slots__ = ("ref", "inner_payload_type", "size")
    REF_FIELD_NUMBER: _ClassVar[int]
    INNER_PAYLOAD_TYPE_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    ref: str
    inner_payload_type: str
    size: int
    def __init__(
        self,
        ref: _Optional[str] = ...,
        inner_payload_type: _Optional[str] = ...,
        size: _Optional[int] = ...,
    ) -> None: ...
