from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

ACTOR_TYPE_AGENT: ActorType
ACTOR_TYPE_HUMAN: ActorType
ACTOR_TYPE_SYSTEM: ActorType
ACTOR_TYPE_UNSPECIFIED: ActorType
DESCRIPTOR: _descriptor.FileDescriptor
EVENT_KIND_ADOPTED: EventKind
EVENT_KIND_CHILD_SPAWNED: EventKind
EVENT_KIND_COMPACTED: EventKind
EVENT_KIND_CREATED: EventKind
EVENT_KIND_GOAL_CHANGED: EventKind
EVENT_KIND_HUMAN_DIRECT_MESSAGE: EventKind
EVENT_KIND_IMPORTED: EventKind
EVENT_KIND_RUN_COMPLETED: EventKind
EVENT_KIND_RUN_FAILED: EventKind
EVENT_KIND_UNSPECIFIED: EventKind
EVENT_KIND_UPSTREAM_MISSING: EventKind
RUN_OUTCOME_CANCELLED: RunOutcome
RUN_OUTCOME_ERROR: RunOutcome
RUN_OUTCOME_TIMEOUT: RunOutcome
RUN_OUTCOME_UNSPECIFIED: RunOutcome
WATCH_PROVENANCE_AMBIENT: WatchProvenance
WATCH_PROVENANCE_EXPLICIT: WatchProvenance
WATCH_PROVENANCE_UNSPECIFIED: WatchProvenance

class Cursor(_message.Message):
    __slots__ = ["acked_version", "claimed_by", "extra_material_kinds", "material_version", "notified_version", "pending_notice_text", "provenance", "target", "updated_at", "watcher_session_key"]
    ACKED_VERSION_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_BY_FIELD_NUMBER: _ClassVar[int]
    EXTRA_MATERIAL_KINDS_FIELD_NUMBER: _ClassVar[int]
    MATERIAL_VERSION_FIELD_NUMBER: _ClassVar[int]
    NOTIFIED_VERSION_FIELD_NUMBER: _ClassVar[int]
    PENDING_NOTICE_TEXT_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    WATCHER_SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    acked_version: int
    claimed_by: str
    extra_material_kinds: _containers.RepeatedScalarFieldContainer[EventKind]
    material_version: int
    notified_version: int
    pending_notice_text: str
    provenance: WatchProvenance
    target: SessionRef
    updated_at: _timestamp_pb2.Timestamp
    watcher_session_key: str
    def __init__(self, watcher_session_key: _Optional[str] = ..., target: _Optional[_Union[SessionRef, _Mapping]] = ..., acked_version: _Optional[int] = ..., notified_version: _Optional[int] = ..., material_version: _Optional[int] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., provenance: _Optional[_Union[WatchProvenance, str]] = ..., extra_material_kinds: _Optional[_Iterable[_Union[EventKind, str]]] = ..., pending_notice_text: _Optional[str] = ..., claimed_by: _Optional[str] = ...) -> None: ...

class EventPayload(_message.Message):
    __slots__ = ["catalog_id", "channel", "host_id", "outcome", "reason", "turns"]
    CATALOG_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    catalog_id: str
    channel: str
    host_id: str
    outcome: RunOutcome
    reason: str
    turns: int
    def __init__(self, outcome: _Optional[_Union[RunOutcome, str]] = ..., channel: _Optional[str] = ..., turns: _Optional[int] = ..., catalog_id: _Optional[str] = ..., host_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class SessionRef(_message.Message):
    __slots__ = ["agent_id", "key"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    key: str
    def __init__(self, key: _Optional[str] = ..., agent_id: _Optional[str] = ...) -> None: ...

class StateEvent(_message.Message):
    __slots__ = ["actor_id", "actor_type", "kind", "occurred_at", "payload", "run_id", "sequence", "session", "summary"]
    ACTOR_ID_FIELD_NUMBER: _ClassVar[int]
    ACTOR_TYPE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    actor_id: str
    actor_type: ActorType
    kind: EventKind
    occurred_at: _timestamp_pb2.Timestamp
    payload: EventPayload
    run_id: str
    sequence: int
    session: SessionRef
    summary: str
    def __init__(self, sequence: _Optional[int] = ..., session: _Optional[_Union[SessionRef, _Mapping]] = ..., kind: _Optional[_Union[EventKind, str]] = ..., actor_type: _Optional[_Union[ActorType, str]] = ..., actor_id: _Optional[str] = ..., run_id: _Optional[str] = ..., summary: _Optional[str] = ..., occurred_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., payload: _Optional[_Union[EventPayload, _Mapping]] = ...) -> None: ...

class EventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class WatchProvenance(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ActorType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class RunOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
