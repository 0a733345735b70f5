from google.protobuf import timestamp_pb2 as _timestamp_pb2
from sessionstate.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetStateVersionsRequest(_message.Message):
    __slots__ = ["sessions"]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[_types_pb2.SessionRef]
    def __init__(self, sessions: _Optional[_Iterable[_Union[_types_pb2.SessionRef, _Mapping]]] = ...) -> None: ...

class GetStateVersionsResponse(_message.Message):
    __slots__ = ["versions"]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[SessionVersion]
    def __init__(self, versions: _Optional[_Iterable[_Union[SessionVersion, _Mapping]]] = ...) -> None: ...

class ListNamespacesRequest(_message.Message):
    __slots__ = ["page_size", "page_token"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListNamespacesResponse(_message.Message):
    __slots__ = ["namespaces", "next_page_token"]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    namespaces: _containers.RepeatedCompositeFieldContainer[NamespaceSummary]
    next_page_token: str
    def __init__(self, namespaces: _Optional[_Iterable[_Union[NamespaceSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ["agent_id", "page_size", "page_token"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    page_size: int
    page_token: str
    def __init__(self, agent_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["next_page_token", "sessions"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    sessions: _containers.RepeatedCompositeFieldContainer[SessionSummary]
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class NamespaceSummary(_message.Message):
    __slots__ = ["events", "name", "pending_notices", "sessions", "updated_at", "watches"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PENDING_NOTICES_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    WATCHES_FIELD_NUMBER: _ClassVar[int]
    events: int
    name: str
    pending_notices: int
    sessions: int
    updated_at: _timestamp_pb2.Timestamp
    watches: int
    def __init__(self, name: _Optional[str] = ..., sessions: _Optional[int] = ..., events: _Optional[int] = ..., watches: _Optional[int] = ..., pending_notices: _Optional[int] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SessionStatusRequest(_message.Message):
    __slots__ = ["changes_since", "limit", "session"]
    CHANGES_SINCE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    changes_since: int
    limit: int
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., changes_since: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class SessionStatusResponse(_message.Message):
    __slots__ = ["session", "state_changes", "state_version"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    STATE_CHANGES_FIELD_NUMBER: _ClassVar[int]
    STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionRef
    state_changes: StateChanges
    state_version: int
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., state_version: _Optional[int] = ..., state_changes: _Optional[_Union[StateChanges, _Mapping]] = ...) -> None: ...

class SessionSummary(_message.Message):
    __slots__ = ["has_upstream", "pruned_through", "session", "state_version", "updated_at"]
    HAS_UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    PRUNED_THROUGH_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    has_upstream: bool
    pruned_through: int
    session: _types_pb2.SessionRef
    state_version: int
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., state_version: _Optional[int] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., pruned_through: _Optional[int] = ..., has_upstream: bool = ...) -> None: ...

class SessionVersion(_message.Message):
    __slots__ = ["session", "state_version"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    STATE_VERSION_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionRef
    state_version: int
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., state_version: _Optional[int] = ...) -> None: ...

class StateChanges(_message.Message):
    __slots__ = ["earliest_available_sequence", "events", "history_gap", "truncated"]
    EARLIEST_AVAILABLE_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_GAP_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    earliest_available_sequence: int
    events: _containers.RepeatedCompositeFieldContainer[_types_pb2.StateEvent]
    history_gap: bool
    truncated: bool
    def __init__(self, events: _Optional[_Iterable[_Union[_types_pb2.StateEvent, _Mapping]]] = ..., history_gap: bool = ..., truncated: bool = ..., earliest_available_sequence: _Optional[int] = ...) -> None: ...
