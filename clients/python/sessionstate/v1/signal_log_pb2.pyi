from google.protobuf import timestamp_pb2 as _timestamp_pb2
from sessionstate.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AppendBatchRequest(_message.Message):
    __slots__ = ["appends"]
    APPENDS_FIELD_NUMBER: _ClassVar[int]
    appends: _containers.RepeatedCompositeFieldContainer[AppendRequest]
    def __init__(self, appends: _Optional[_Iterable[_Union[AppendRequest, _Mapping]]] = ...) -> None: ...

class AppendBatchResponse(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AppendResult]
    def __init__(self, results: _Optional[_Iterable[_Union[AppendResult, _Mapping]]] = ...) -> None: ...

class AppendFailure(_message.Message):
    __slots__ = ["code", "message"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class AppendRequest(_message.Message):
    __slots__ = ["actor_id", "actor_type", "dedupe_key", "kind", "notify_session_keys", "occurred_at", "only_if_watched", "payload", "run_id", "session", "summary"]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_TYPE_FIELD_NUMBER: _ClassVar[int]
    DEDUPE_KEY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_SESSION_KEYS_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    ONLY_IF_WATCHED_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    actor_type: _types_pb2.ActorType
    dedupe_key: str
    kind: _types_pb2.EventKind
    notify_session_keys: _containers.RepeatedScalarFieldContainer[str]
    occurred_at: _timestamp_pb2.Timestamp
    only_if_watched: bool
    payload: _types_pb2.EventPayload
    run_id: str
    session: _types_pb2.SessionRef
    summary: str
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., kind: _Optional[_Union[_types_pb2.EventKind, str]] = ..., actor_type: _Optional[_Union[_types_pb2.ActorType, str]] = ..., actor_id: _Optional[str] = ..., run_id: _Optional[str] = ..., summary: _Optional[str] = ..., occurred_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., payload: _Optional[_Union[_types_pb2.EventPayload, _Mapping]] = ..., dedupe_key: _Optional[str] = ..., notify_session_keys: _Optional[_Iterable[str]] = ..., only_if_watched: bool = ...) -> None: ...

class AppendResponse(_message.Message):
    __slots__ = ["deduplicated", "event", "recorded", "state_version"]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    RECORDED_FIELD_NUMBER: _ClassVar[int]
    STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    deduplicated: bool
    event: _types_pb2.StateEvent
    recorded: bool
    state_version: int
    def __init__(self, recorded: bool = ..., deduplicated: bool = ..., event: _Optional[_Union[_types_pb2.StateEvent, _Mapping]] = ..., state_version: _Optional[int] = ...) -> None: ...

class AppendResult(_message.Message):
    __slots__ = ["failure", "response"]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    failure: AppendFailure
    response: AppendResponse
    def __init__(self, response: _Optional[_Union[AppendResponse, _Mapping]] = ..., failure: _Optional[_Union[AppendFailure, _Mapping]] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ...) -> None: ...

class DeleteSessionResponse(_message.Message):
    __slots__ = ["cursors_removed", "events_removed", "link_removed"]
    CURSORS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    EVENTS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    LINK_REMOVED_FIELD_NUMBER: _ClassVar[int]
    cursors_removed: int
    events_removed: int
    link_removed: bool
    def __init__(self, events_removed: _Optional[int] = ..., cursors_removed: _Optional[int] = ..., link_removed: bool = ...) -> None: ...

class PruneRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class PruneResponse(_message.Message):
    __slots__ = ["cursors_removed", "events_removed"]
    CURSORS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    EVENTS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    cursors_removed: int
    events_removed: int
    def __init__(self, events_removed: _Optional[int] = ..., cursors_removed: _Optional[int] = ...) -> None: ...

class ResetSessionRequest(_message.Message):
    __slots__ = ["watcher_session_key"]
    WATCHER_SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    watcher_session_key: str
    def __init__(self, watcher_session_key: _Optional[str] = ...) -> None: ...

class ResetSessionResponse(_message.Message):
    __slots__ = ["cursors_removed"]
    CURSORS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    cursors_removed: int
    def __init__(self, cursors_removed: _Optional[int] = ...) -> None: ...
