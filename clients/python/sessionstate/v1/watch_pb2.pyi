from sessionstate.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AckNoticesRequest(_message.Message):
    __slots__ = ["acks"]
    ACKS_FIELD_NUMBER: _ClassVar[int]
    acks: _containers.RepeatedCompositeFieldContainer[NoticeAck]
    def __init__(self, acks: _Optional[_Iterable[_Union[NoticeAck, _Mapping]]] = ...) -> None: ...

class AckNoticesResponse(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AckResult]
    def __init__(self, results: _Optional[_Iterable[_Union[AckResult, _Mapping]]] = ...) -> None: ...

class AckResult(_message.Message):
    __slots__ = ["acknowledged", "cursor", "reopened"]
    ACKNOWLEDGED_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    REOPENED_FIELD_NUMBER: _ClassVar[int]
    acknowledged: bool
    cursor: _types_pb2.Cursor
    reopened: bool
    def __init__(self, acknowledged: bool = ..., reopened: bool = ..., cursor: _Optional[_Union[_types_pb2.Cursor, _Mapping]] = ...) -> None: ...

class ListWatchesRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "provenance", "target", "watcher_session_key"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    WATCHER_SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    provenance: _types_pb2.WatchProvenance
    target: _types_pb2.SessionRef
    watcher_session_key: str
    def __init__(self, watcher_session_key: _Optional[str] = ..., target: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., provenance: _Optional[_Union[_types_pb2.WatchProvenance, str]] = ...) -> None: ...

class ListWatchesResponse(_message.Message):
    __slots__ = ["cursors", "next_page_token"]
    CURSORS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    cursors: _containers.RepeatedCompositeFieldContainer[_types_pb2.Cursor]
    next_page_token: str
    def __init__(self, cursors: _Optional[_Iterable[_Union[_types_pb2.Cursor, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class NoticeAck(_message.Message):
    __slots__ = ["notified_version", "reconciled_through", "target", "watcher_session_key"]
    NOTIFIED_VERSION_FIELD_NUMBER: _ClassVar[int]
    RECONCILED_THROUGH_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    WATCHER_SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    notified_version: int
    reconciled_through: int
    target: _types_pb2.SessionRef
    watcher_session_key: str
    def __init__(self, watcher_session_key: _Optional[str] = ..., target: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., notified_version: _Optional[int] = ..., reconciled_through: _Optional[int] = ...) -> None: ...

class ReleaseNoticesRequest(_message.Message):
    __slots__ = ["claim_ids"]
    CLAIM_IDS_FIELD_NUMBER: _ClassVar[int]
    claim_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, claim_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ReleaseNoticesResponse(_message.Message):
    __slots__ = ["released"]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, released: _Optional[_Iterable[bool]] = ...) -> None: ...

class StaleNotice(_message.Message):
    __slots__ = ["changes_since", "claim_id", "context_key", "delivery_count", "notified_version", "queue_only", "target", "text", "wake", "watcher_session_key"]
    CHANGES_SINCE_FIELD_NUMBER: _ClassVar[int]
    CLAIM_ID_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_KEY_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_COUNT_FIELD_NUMBER: _ClassVar[int]
    NOTIFIED_VERSION_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ONLY_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    WAKE_FIELD_NUMBER: _ClassVar[int]
    WATCHER_SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    changes_since: int
    claim_id: str
    context_key: str
    delivery_count: int
    notified_version: int
    queue_only: bool
    target: _types_pb2.SessionRef
    text: str
    wake: bool
    watcher_session_key: str
    def __init__(self, watcher_session_key: _Optional[str] = ..., target: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., changes_since: _Optional[int] = ..., notified_version: _Optional[int] = ..., text: _Optional[str] = ..., wake: bool = ..., context_key: _Optional[str] = ..., queue_only: bool = ..., claim_id: _Optional[str] = ..., delivery_count: _Optional[int] = ...) -> None: ...

class SubscribeStaleNoticesRequest(_message.Message):
    __slots__ = ["consumer_group", "max_in_flight", "watcher_key_prefixes", "watcher_session_keys"]
    CONSUMER_GROUP_FIELD_NUMBER: _ClassVar[int]
    MAX_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    WATCHER_KEY_PREFIXES_FIELD_NUMBER: _ClassVar[int]
    WATCHER_SESSION_KEYS_FIELD_NUMBER: _ClassVar[int]
    consumer_group: str
    max_in_flight: int
    watcher_key_prefixes: _containers.RepeatedScalarFieldContainer[str]
    watcher_session_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, watcher_session_keys: _Optional[_Iterable[str]] = ..., watcher_key_prefixes: _Optional[_Iterable[str]] = ..., consumer_group: _Optional[str] = ..., max_in_flight: _Optional[int] = ...) -> None: ...

class SubscribeStaleNoticesResponse(_message.Message):
    __slots__ = ["notice", "synced"]
    NOTICE_FIELD_NUMBER: _ClassVar[int]
    SYNCED_FIELD_NUMBER: _ClassVar[int]
    notice: StaleNotice
    synced: Synced
    def __init__(self, notice: _Optional[_Union[StaleNotice, _Mapping]] = ..., synced: _Optional[_Union[Synced, _Mapping]] = ...) -> None: ...

class Synced(_message.Message):
    __slots__ = ["pending_delivered"]
    PENDING_DELIVERED_FIELD_NUMBER: _ClassVar[int]
    pending_delivered: int
    def __init__(self, pending_delivered: _Optional[int] = ...) -> None: ...

class UnwatchRequest(_message.Message):
    __slots__ = ["target", "watcher_session_key"]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    WATCHER_SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    target: _types_pb2.SessionRef
    watcher_session_key: str
    def __init__(self, watcher_session_key: _Optional[str] = ..., target: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ...) -> None: ...

class UnwatchResponse(_message.Message):
    __slots__ = ["removed"]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: bool
    def __init__(self, removed: bool = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ["extra_material_kinds", "provenance", "target", "watcher_session_key"]
    EXTRA_MATERIAL_KINDS_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    WATCHER_SESSION_KEY_FIELD_NUMBER: _ClassVar[int]
    extra_material_kinds: _containers.RepeatedScalarFieldContainer[_types_pb2.EventKind]
    provenance: _types_pb2.WatchProvenance
    target: _types_pb2.SessionRef
    watcher_session_key: str
    def __init__(self, watcher_session_key: _Optional[str] = ..., target: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., provenance: _Optional[_Union[_types_pb2.WatchProvenance, str]] = ..., extra_material_kinds: _Optional[_Iterable[_Union[_types_pb2.EventKind, str]]] = ...) -> None: ...

class WatchResponse(_message.Message):
    __slots__ = ["cursor", "reason", "watched"]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    WATCHED_FIELD_NUMBER: _ClassVar[int]
    cursor: _types_pb2.Cursor
    reason: str
    watched: bool
    def __init__(self, watched: bool = ..., reason: _Optional[str] = ..., cursor: _Optional[_Union[_types_pb2.Cursor, _Mapping]] = ...) -> None: ...
