from google.protobuf import timestamp_pb2 as _timestamp_pb2
from sessionstate.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
REMOTE_ITEM_KIND_AGENT_MESSAGE: RemoteItemKind
REMOTE_ITEM_KIND_OTHER: RemoteItemKind
REMOTE_ITEM_KIND_TOOL: RemoteItemKind
REMOTE_ITEM_KIND_UNSPECIFIED: RemoteItemKind
REMOTE_ITEM_KIND_USER_MESSAGE: RemoteItemKind

class AdoptRequest(_message.Message):
    __slots__ = ["catalog_id", "host_id", "local_transcript", "paired_node", "session", "thread_id"]
    CATALOG_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    LOCAL_TRANSCRIPT_FIELD_NUMBER: _ClassVar[int]
    PAIRED_NODE_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    catalog_id: str
    host_id: str
    local_transcript: LocalTranscript
    paired_node: PairedNode
    session: _types_pb2.SessionRef
    thread_id: str
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., catalog_id: _Optional[str] = ..., host_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., local_transcript: _Optional[_Union[LocalTranscript, _Mapping]] = ..., paired_node: _Optional[_Union[PairedNode, _Mapping]] = ...) -> None: ...

class AdoptResponse(_message.Message):
    __slots__ = ["event", "link", "linked", "reason"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    LINKED_FIELD_NUMBER: _ClassVar[int]
    LINK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    event: _types_pb2.StateEvent
    link: UpstreamLink
    linked: bool
    reason: str
    def __init__(self, event: _Optional[_Union[_types_pb2.StateEvent, _Mapping]] = ..., linked: bool = ..., reason: _Optional[str] = ..., link: _Optional[_Union[UpstreamLink, _Mapping]] = ...) -> None: ...

class ListUpstreamLinksRequest(_message.Message):
    __slots__ = ["agent_id", "page_size", "page_token"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    page_size: int
    page_token: str
    def __init__(self, agent_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListUpstreamLinksResponse(_message.Message):
    __slots__ = ["links", "next_page_token"]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    links: _containers.RepeatedCompositeFieldContainer[UpstreamLink]
    next_page_token: str
    def __init__(self, links: _Optional[_Iterable[_Union[UpstreamLink, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class LocalTranscript(_message.Message):
    __slots__ = ["path"]
    PATH_FIELD_NUMBER: _ClassVar[int]
    path: str
    def __init__(self, path: _Optional[str] = ...) -> None: ...

class PairedNode(_message.Message):
    __slots__ = ["newest_item_uuid", "node_id"]
    NEWEST_ITEM_UUID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    newest_item_uuid: str
    node_id: str
    def __init__(self, node_id: _Optional[str] = ..., newest_item_uuid: _Optional[str] = ...) -> None: ...

class RecordOwnUserTextRequest(_message.Message):
    __slots__ = ["session", "text"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    session: _types_pb2.SessionRef
    text: str
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., text: _Optional[str] = ...) -> None: ...

class RecordOwnUserTextResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class RemoteItem(_message.Message):
    __slots__ = ["kind", "occurred_at", "text", "uuid"]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    kind: RemoteItemKind
    occurred_at: _timestamp_pb2.Timestamp
    text: str
    uuid: str
    def __init__(self, uuid: _Optional[str] = ..., kind: _Optional[_Union[RemoteItemKind, str]] = ..., text: _Optional[str] = ..., occurred_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ReportRemoteItemsRequest(_message.Message):
    __slots__ = ["items", "session"]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[RemoteItem]
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., items: _Optional[_Iterable[_Union[RemoteItem, _Mapping]]] = ...) -> None: ...

class ReportRemoteItemsResponse(_message.Message):
    __slots__ = ["event", "human_turns"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    HUMAN_TURNS_FIELD_NUMBER: _ClassVar[int]
    event: _types_pb2.StateEvent
    human_turns: int
    def __init__(self, human_turns: _Optional[int] = ..., event: _Optional[_Union[_types_pb2.StateEvent, _Mapping]] = ...) -> None: ...

class ScanNowRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ScanNowResponse(_message.Message):
    __slots__ = ["events_recorded", "links_failed", "links_held", "links_scanned", "links_timed_out"]
    EVENTS_RECORDED_FIELD_NUMBER: _ClassVar[int]
    LINKS_FAILED_FIELD_NUMBER: _ClassVar[int]
    LINKS_HELD_FIELD_NUMBER: _ClassVar[int]
    LINKS_SCANNED_FIELD_NUMBER: _ClassVar[int]
    LINKS_TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    events_recorded: int
    links_failed: int
    links_held: int
    links_scanned: int
    links_timed_out: int
    def __init__(self, links_scanned: _Optional[int] = ..., events_recorded: _Optional[int] = ..., links_held: _Optional[int] = ..., links_timed_out: _Optional[int] = ..., links_failed: _Optional[int] = ...) -> None: ...

class SetRunActiveRequest(_message.Message):
    __slots__ = ["active", "session"]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    active: bool
    session: _types_pb2.SessionRef
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., active: bool = ...) -> None: ...

class SetRunActiveResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class UpstreamLink(_message.Message):
    __slots__ = ["catalog_id", "host_id", "last_scan_outcome", "last_scanned_at", "marker", "missed_checks", "session", "source", "thread_id", "updated_at"]
    CATALOG_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_SCANNED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_SCAN_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    MARKER_FIELD_NUMBER: _ClassVar[int]
    MISSED_CHECKS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    catalog_id: str
    host_id: str
    last_scan_outcome: str
    last_scanned_at: _timestamp_pb2.Timestamp
    marker: str
    missed_checks: int
    session: _types_pb2.SessionRef
    source: str
    thread_id: str
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, session: _Optional[_Union[_types_pb2.SessionRef, _Mapping]] = ..., catalog_id: _Optional[str] = ..., host_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., source: _Optional[str] = ..., marker: _Optional[str] = ..., missed_checks: _Optional[int] = ..., last_scanned_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_scan_outcome: _Optional[str] = ...) -> None: ...

class RemoteItemKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
