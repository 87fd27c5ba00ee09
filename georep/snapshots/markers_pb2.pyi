from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MarkerKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MARKER_KIND_UNSPECIFIED: _ClassVar[MarkerKind]
    SNAPSHOT_REQUEST: _ClassVar[MarkerKind]
    SNAPSHOT_RESPONSE: _ClassVar[MarkerKind]
    SNAPSHOT: _ClassVar[MarkerKind]
    SUBSCRIPTION_UPDATE: _ClassVar[MarkerKind]
    SUBSCRIPTION_ACK_RANGES: _ClassVar[MarkerKind]
MARKER_KIND_UNSPECIFIED: MarkerKind
SNAPSHOT_REQUEST: MarkerKind
SNAPSHOT_RESPONSE: MarkerKind
SNAPSHOT: MarkerKind
SUBSCRIPTION_UPDATE: MarkerKind
SUBSCRIPTION_ACK_RANGES: MarkerKind

class Position(_message.Message):
    __slots__ = ("ledger_id", "entry_id")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: int
    entry_id: int
    def __init__(self, ledger_id: _Optional[int] = ..., entry_id: _Optional[int] = ...) -> None: ...

class ClusterPosition(_message.Message):
    __slots__ = ("cluster", "position")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    position: Position
    def __init__(self, cluster: _Optional[str] = ..., position: _Optional[_Union[Position, _Mapping]] = ...) -> None: ...

class SnapshotRequest(_message.Message):
    __slots__ = ("snapshot_id", "source_cluster")
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_CLUSTER_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: str
    source_cluster: str
    def __init__(self, snapshot_id: _Optional[str] = ..., source_cluster: _Optional[str] = ...) -> None: ...

class SnapshotResponse(_message.Message):
    __slots__ = ("snapshot_id", "cluster")
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: str
    cluster: ClusterPosition
    def __init__(self, snapshot_id: _Optional[str] = ..., cluster: _Optional[_Union[ClusterPosition, _Mapping]] = ...) -> None: ...

class Snapshot(_message.Message):
    __slots__ = ("snapshot_id", "local_position", "clusters")
    SNAPSHOT_ID_FIELD_NUMBER: _ClassVar[int]
    LOCAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    snapshot_id: str
    local_position: Position
    clusters: _containers.RepeatedCompositeFieldContainer[ClusterPosition]
    def __init__(self, snapshot_id: _Optional[str] = ..., local_position: _Optional[_Union[Position, _Mapping]] = ..., clusters: _Optional[_Iterable[_Union[ClusterPosition, _Mapping]]] = ...) -> None: ...

class SubscriptionUpdate(_message.Message):
    __slots__ = ("subscription_name", "clusters")
    SUBSCRIPTION_NAME_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_FIELD_NUMBER: _ClassVar[int]
    subscription_name: str
    clusters: _containers.RepeatedCompositeFieldContainer[ClusterPosition]
    def __init__(self, subscription_name: _Optional[str] = ..., clusters: _Optional[_Iterable[_Union[ClusterPosition, _Mapping]]] = ...) -> None: ...

class PositionRange(_message.Message):
    __slots__ = ("first", "last")
    FIRST_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    first: Position
    last: Position
    def __init__(self, first: _Optional[_Union[Position, _Mapping]] = ..., last: _Optional[_Union[Position, _Mapping]] = ...) -> None: ...

class PartialBatch(_message.Message):
    __slots__ = ("position", "acknowledged_words", "batch_size")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    ACKNOWLEDGED_WORDS_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    position: Position
    acknowledged_words: _containers.RepeatedScalarFieldContainer[int]
    batch_size: int
    def __init__(self, position: _Optional[_Union[Position, _Mapping]] = ..., acknowledged_words: _Optional[_Iterable[int]] = ..., batch_size: _Optional[int] = ...) -> None: ...

class OriginAcks(_message.Message):
    __slots__ = ("origin_cluster", "ranges", "partial_batches")
    ORIGIN_CLUSTER_FIELD_NUMBER: _ClassVar[int]
    RANGES_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_BATCHES_FIELD_NUMBER: _ClassVar[int]
    origin_cluster: str
    ranges: _containers.RepeatedCompositeFieldContainer[PositionRange]
    partial_batches: _containers.RepeatedCompositeFieldContainer[PartialBatch]
    def __init__(self, origin_cluster: _Optional[str] = ..., ranges: _Optional[_Iterable[_Union[PositionRange, _Mapping]]] = ..., partial_batches: _Optional[_Iterable[_Union[PartialBatch, _Mapping]]] = ...) -> None: ...

class SubscriptionAckRanges(_message.Message):
    __slots__ = ("subscription_name", "source_cluster", "sequence", "mark_delete_position", "origins")
    SUBSCRIPTION_NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_CLUSTER_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    MARK_DELETE_POSITION_FIELD_NUMBER: _ClassVar[int]
    ORIGINS_FIELD_NUMBER: _ClassVar[int]
    subscription_name: str
    source_cluster: str
    sequence: int
    mark_delete_position: Position
    origins: _containers.RepeatedCompositeFieldContainer[OriginAcks]
    def __init__(self, subscription_name: _Optional[str] = ..., source_cluster: _Optional[str] = ..., sequence: _Optional[int] = ..., mark_delete_position: _Optional[_Union[Position, _Mapping]] = ..., origins: _Optional[_Iterable[_Union[OriginAcks, _Mapping]]] = ...) -> None: ...
