from google.protobuf import timestamp_pb2 as _timestamp_pb2
from sessionstate.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Caller(_message.Message):
    __slots__ = ["admin", "agents", "authenticated", "namespaces", "token_name"]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    AUTHENTICATED_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    TOKEN_NAME_FIELD_NUMBER: _ClassVar[int]
    admin: bool
    agents: _containers.RepeatedScalarFieldContainer[str]
    authenticated: bool
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    token_name: str
    def __init__(self, authenticated: bool = ..., token_name: _Optional[str] = ..., admin: bool = ..., agents: _Optional[_Iterable[str]] = ..., namespaces: _Optional[_Iterable[str]] = ...) -> None: ...

class GetServerInfoRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetServerInfoResponse(_message.Message):
    __slots__ = ["backend", "caller", "database", "database_reachable", "hooks", "minutes", "namespace", "node_id", "retention", "started_at", "upstream_monitor", "version"]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    DATABASE_FIELD_NUMBER: _ClassVar[int]
    DATABASE_REACHABLE_FIELD_NUMBER: _ClassVar[int]
    HOOKS_FIELD_NUMBER: _ClassVar[int]
    MINUTES_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RETENTION_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_MONITOR_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    backend: str
    caller: Caller
    database: str
    database_reachable: bool
    hooks: _containers.RepeatedCompositeFieldContainer[HookActivity]
    minutes: _containers.RepeatedCompositeFieldContainer[MinuteActivity]
    namespace: str
    node_id: str
    retention: RetentionState
    started_at: _timestamp_pb2.Timestamp
    upstream_monitor: MonitorState
    version: str
    def __init__(self, version: _Optional[str] = ..., backend: _Optional[str] = ..., node_id: _Optional[str] = ..., database_reachable: bool = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., retention: _Optional[_Union[RetentionState, _Mapping]] = ..., upstream_monitor: _Optional[_Union[MonitorState, _Mapping]] = ..., minutes: _Optional[_Iterable[_Union[MinuteActivity, _Mapping]]] = ..., caller: _Optional[_Union[Caller, _Mapping]] = ..., namespace: _Optional[str] = ..., hooks: _Optional[_Iterable[_Union[HookActivity, _Mapping]]] = ..., database: _Optional[str] = ...) -> None: ...

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

class HookActivity(_message.Message):
    __slots__ = ["cli", "last_call_at", "matched", "refused", "unmatched"]
    CLI_FIELD_NUMBER: _ClassVar[int]
    LAST_CALL_AT_FIELD_NUMBER: _ClassVar[int]
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    UNMATCHED_FIELD_NUMBER: _ClassVar[int]
    cli: str
    last_call_at: _timestamp_pb2.Timestamp
    matched: int
    refused: int
    unmatched: int
    def __init__(self, cli: _Optional[str] = ..., matched: _Optional[int] = ..., unmatched: _Optional[int] = ..., refused: _Optional[int] = ..., last_call_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

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
    __slots__ = ["agent_id", "key_prefix", "page_size", "page_token", "recent_first"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_PREFIX_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RECENT_FIRST_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    key_prefix: str
    page_size: int
    page_token: str
    recent_first: bool
    def __init__(self, agent_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., key_prefix: _Optional[str] = ..., recent_first: bool = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["next_page_token", "sessions"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    sessions: _containers.RepeatedCompositeFieldContainer[SessionSummary]
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class MinuteActivity(_message.Message):
    __slots__ = ["appends", "minute", "notices_acknowledged", "notices_opened"]
    APPENDS_FIELD_NUMBER: _ClassVar[int]
    MINUTE_FIELD_NUMBER: _ClassVar[int]
    NOTICES_ACKNOWLEDGED_FIELD_NUMBER: _ClassVar[int]
    NOTICES_OPENED_FIELD_NUMBER: _ClassVar[int]
    appends: int
    minute: _timestamp_pb2.Timestamp
    notices_acknowledged: int
    notices_opened: int
    def __init__(self, minute: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., appends: _Optional[int] = ..., notices_opened: _Optional[int] = ..., notices_acknowledged: _Optional[int] = ...) -> None: ...

class MonitorState(_message.Message):
    __slots__ = ["interval_ms", "last_tick_at", "last_tick_events_recorded", "last_tick_links_failed", "last_tick_links_scanned", "last_tick_links_timed_out"]
    INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_TICK_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_TICK_EVENTS_RECORDED_FIELD_NUMBER: _ClassVar[int]
    LAST_TICK_LINKS_FAILED_FIELD_NUMBER: _ClassVar[int]
    LAST_TICK_LINKS_SCANNED_FIELD_NUMBER: _ClassVar[int]
    LAST_TICK_LINKS_TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    interval_ms: int
    last_tick_at: _timestamp_pb2.Timestamp
    last_tick_events_recorded: int
    last_tick_links_failed: int
    last_tick_links_scanned: int
    last_tick_links_timed_out: int
    def __init__(self, interval_ms: _Optional[int] = ..., last_tick_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_tick_links_scanned: _Optional[int] = ..., last_tick_events_recorded: _Optional[int] = ..., last_tick_links_timed_out: _Optional[int] = ..., last_tick_links_failed: _Optional[int] = ...) -> None: ...

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

class RetentionState(_message.Message):
    __slots__ = ["last_pass_at", "last_pass_cursors_removed", "last_pass_events_removed", "max_events", "retention_days"]
    LAST_PASS_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_PASS_CURSORS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    LAST_PASS_EVENTS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    MAX_EVENTS_FIELD_NUMBER: _ClassVar[int]
    RETENTION_DAYS_FIELD_NUMBER: _ClassVar[int]
    last_pass_at: _timestamp_pb2.Timestamp
    last_pass_cursors_removed: int
    last_pass_events_removed: int
    max_events: int
    retention_days: int
    def __init__(self, retention_days: _Optional[int] = ..., max_events: _Optional[int] = ..., last_pass_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_pass_events_removed: _Optional[int] = ..., last_pass_cursors_removed: _Optional[int] = ...) -> None: ...

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
