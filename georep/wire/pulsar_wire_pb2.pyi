from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CompressionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMPRESSION_NONE: _ClassVar[CompressionType]
    COMPRESSION_LZ4: _ClassVar[CompressionType]
    COMPRESSION_ZLIB: _ClassVar[CompressionType]
    COMPRESSION_ZSTD: _ClassVar[CompressionType]
    COMPRESSION_SNAPPY: _ClassVar[CompressionType]

class ProducerAccessMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRODUCER_ACCESS_SHARED: _ClassVar[ProducerAccessMode]
    PRODUCER_ACCESS_EXCLUSIVE: _ClassVar[ProducerAccessMode]
    PRODUCER_ACCESS_WAIT_FOR_EXCLUSIVE: _ClassVar[ProducerAccessMode]
    PRODUCER_ACCESS_EXCLUSIVE_WITH_FENCING: _ClassVar[ProducerAccessMode]

class ServerError(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN_ERROR: _ClassVar[ServerError]
    METADATA_ERROR: _ClassVar[ServerError]
    PERSISTENCE_ERROR: _ClassVar[ServerError]
    AUTHENTICATION_ERROR: _ClassVar[ServerError]
    AUTHORIZATION_ERROR: _ClassVar[ServerError]
    CONSUMER_BUSY: _ClassVar[ServerError]
    SERVICE_NOT_READY: _ClassVar[ServerError]
    PRODUCER_BLOCKED_QUOTA_EXCEEDED_ERROR: _ClassVar[ServerError]
    PRODUCER_BLOCKED_QUOTA_EXCEEDED_EXCEPTION: _ClassVar[ServerError]
    CHECKSUM_ERROR: _ClassVar[ServerError]
    UNSUPPORTED_VERSION_ERROR: _ClassVar[ServerError]
    TOPIC_NOT_FOUND: _ClassVar[ServerError]
    SUBSCRIPTION_NOT_FOUND: _ClassVar[ServerError]
    CONSUMER_NOT_FOUND: _ClassVar[ServerError]
    TOO_MANY_REQUESTS: _ClassVar[ServerError]
    TOPIC_TERMINATED_ERROR: _ClassVar[ServerError]
    PRODUCER_BUSY: _ClassVar[ServerError]
    INVALID_TOPIC_NAME: _ClassVar[ServerError]
    INCOMPATIBLE_SCHEMA: _ClassVar[ServerError]
    CONSUMER_ASSIGN_ERROR: _ClassVar[ServerError]
    TRANSACTION_COORDINATOR_NOT_FOUND: _ClassVar[ServerError]
    INVALID_TXN_STATUS: _ClassVar[ServerError]
    NOT_ALLOWED_ERROR: _ClassVar[ServerError]
    TRANSACTION_CONFLICT: _ClassVar[ServerError]
    TRANSACTION_NOT_FOUND: _ClassVar[ServerError]
    PRODUCER_FENCED: _ClassVar[ServerError]

class AuthMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AUTH_METHOD_NONE: _ClassVar[AuthMethod]
    AUTH_METHOD_YCA_V1: _ClassVar[AuthMethod]
    AUTH_METHOD_ATHENS: _ClassVar[AuthMethod]

class ProtocolVersion(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROTOCOL_V0: _ClassVar[ProtocolVersion]
    PROTOCOL_V1: _ClassVar[ProtocolVersion]
    PROTOCOL_V2: _ClassVar[ProtocolVersion]
    PROTOCOL_V3: _ClassVar[ProtocolVersion]
    PROTOCOL_V4: _ClassVar[ProtocolVersion]
    PROTOCOL_V5: _ClassVar[ProtocolVersion]
    PROTOCOL_V6: _ClassVar[ProtocolVersion]
    PROTOCOL_V7: _ClassVar[ProtocolVersion]
    PROTOCOL_V8: _ClassVar[ProtocolVersion]
    PROTOCOL_V9: _ClassVar[ProtocolVersion]
    PROTOCOL_V10: _ClassVar[ProtocolVersion]
    PROTOCOL_V11: _ClassVar[ProtocolVersion]
    PROTOCOL_V12: _ClassVar[ProtocolVersion]
    PROTOCOL_V13: _ClassVar[ProtocolVersion]
    PROTOCOL_V14: _ClassVar[ProtocolVersion]
    PROTOCOL_V15: _ClassVar[ProtocolVersion]
    PROTOCOL_V16: _ClassVar[ProtocolVersion]
    PROTOCOL_V17: _ClassVar[ProtocolVersion]
    PROTOCOL_V18: _ClassVar[ProtocolVersion]
    PROTOCOL_V19: _ClassVar[ProtocolVersion]
    PROTOCOL_V20: _ClassVar[ProtocolVersion]
    PROTOCOL_V21: _ClassVar[ProtocolVersion]

class KeySharedMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KEY_SHARED_AUTO_SPLIT: _ClassVar[KeySharedMode]
    KEY_SHARED_STICKY: _ClassVar[KeySharedMode]
COMPRESSION_NONE: CompressionType
COMPRESSION_LZ4: CompressionType
COMPRESSION_ZLIB: CompressionType
COMPRESSION_ZSTD: CompressionType
COMPRESSION_SNAPPY: CompressionType
PRODUCER_ACCESS_SHARED: ProducerAccessMode
PRODUCER_ACCESS_EXCLUSIVE: ProducerAccessMode
PRODUCER_ACCESS_WAIT_FOR_EXCLUSIVE: ProducerAccessMode
PRODUCER_ACCESS_EXCLUSIVE_WITH_FENCING: ProducerAccessMode
UNKNOWN_ERROR: ServerError
METADATA_ERROR: ServerError
PERSISTENCE_ERROR: ServerError
AUTHENTICATION_ERROR: ServerError
AUTHORIZATION_ERROR: ServerError
CONSUMER_BUSY: ServerError
SERVICE_NOT_READY: ServerError
PRODUCER_BLOCKED_QUOTA_EXCEEDED_ERROR: ServerError
PRODUCER_BLOCKED_QUOTA_EXCEEDED_EXCEPTION: ServerError
CHECKSUM_ERROR: ServerError
UNSUPPORTED_VERSION_ERROR: ServerError
TOPIC_NOT_FOUND: ServerError
SUBSCRIPTION_NOT_FOUND: ServerError
CONSUMER_NOT_FOUND: ServerError
TOO_MANY_REQUESTS: ServerError
TOPIC_TERMINATED_ERROR: ServerError
PRODUCER_BUSY: ServerError
INVALID_TOPIC_NAME: ServerError
INCOMPATIBLE_SCHEMA: ServerError
CONSUMER_ASSIGN_ERROR: ServerError
TRANSACTION_COORDINATOR_NOT_FOUND: ServerError
INVALID_TXN_STATUS: ServerError
NOT_ALLOWED_ERROR: ServerError
TRANSACTION_CONFLICT: ServerError
TRANSACTION_NOT_FOUND: ServerError
PRODUCER_FENCED: ServerError
AUTH_METHOD_NONE: AuthMethod
AUTH_METHOD_YCA_V1: AuthMethod
AUTH_METHOD_ATHENS: AuthMethod
PROTOCOL_V0: ProtocolVersion
PROTOCOL_V1: ProtocolVersion
PROTOCOL_V2: ProtocolVersion
PROTOCOL_V3: ProtocolVersion
PROTOCOL_V4: ProtocolVersion
PROTOCOL_V5: ProtocolVersion
PROTOCOL_V6: ProtocolVersion
PROTOCOL_V7: ProtocolVersion
PROTOCOL_V8: ProtocolVersion
PROTOCOL_V9: ProtocolVersion
PROTOCOL_V10: ProtocolVersion
PROTOCOL_V11: ProtocolVersion
PROTOCOL_V12: ProtocolVersion
PROTOCOL_V13: ProtocolVersion
PROTOCOL_V14: ProtocolVersion
PROTOCOL_V15: ProtocolVersion
PROTOCOL_V16: ProtocolVersion
PROTOCOL_V17: ProtocolVersion
PROTOCOL_V18: ProtocolVersion
PROTOCOL_V19: ProtocolVersion
PROTOCOL_V20: ProtocolVersion
PROTOCOL_V21: ProtocolVersion
KEY_SHARED_AUTO_SPLIT: KeySharedMode
KEY_SHARED_STICKY: KeySharedMode

class MessageIdData(_message.Message):
    __slots__ = ("ledger_id", "entry_id", "partition", "batch_index", "ack_set", "batch_size", "first_chunk_message_id")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    BATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    ACK_SET_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    FIRST_CHUNK_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_id: int
    entry_id: int
    partition: int
    batch_index: int
    ack_set: _containers.RepeatedScalarFieldContainer[int]
    batch_size: int
    first_chunk_message_id: MessageIdData
    def __init__(self, ledger_id: _Optional[int] = ..., entry_id: _Optional[int] = ..., partition: _Optional[int] = ..., batch_index: _Optional[int] = ..., ack_set: _Optional[_Iterable[int]] = ..., batch_size: _Optional[int] = ..., first_chunk_message_id: _Optional[_Union[MessageIdData, _Mapping]] = ...) -> None: ...

class KeyValue(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class KeyLongValue(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: int
    def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...

class IntRange(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: int
    end: int
    def __init__(self, start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class EncryptionKeys(_message.Message):
    __slots__ = ("key", "value", "metadata")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    metadata: _containers.RepeatedCompositeFieldContainer[KeyValue]
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ..., metadata: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ...) -> None: ...

class Schema(_message.Message):
    __slots__ = ("name", "data", "type", "properties")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        NONE: _ClassVar[Schema.Type]
        STRING: _ClassVar[Schema.Type]
        JSON: _ClassVar[Schema.Type]
        PROTOBUF: _ClassVar[Schema.Type]
        AVRO: _ClassVar[Schema.Type]
        BOOL: _ClassVar[Schema.Type]
        INT8: _ClassVar[Schema.Type]
        INT16: _ClassVar[Schema.Type]
        INT32: _ClassVar[Schema.Type]
        INT64: _ClassVar[Schema.Type]
        FLOAT: _ClassVar[Schema.Type]
        DOUBLE: _ClassVar[Schema.Type]
        DATE: _ClassVar[Schema.Type]
        TIME: _ClassVar[Schema.Type]
        TIMESTAMP: _ClassVar[Schema.Type]
        KEY_VALUE: _ClassVar[Schema.Type]
        INSTANT: _ClassVar[Schema.Type]
        LOCAL_DATE: _ClassVar[Schema.Type]
        LOCAL_TIME: _ClassVar[Schema.Type]
        LOCAL_DATE_TIME: _ClassVar[Schema.Type]
        PROTOBUF_NATIVE: _ClassVar[Schema.Type]
        AUTO_CONSUME: _ClassVar[Schema.Type]
        EXTERNAL: _ClassVar[Schema.Type]
    NONE: Schema.Type
    STRING: Schema.Type
    JSON: Schema.Type
    PROTOBUF: Schema.Type
    AVRO: Schema.Type
    BOOL: Schema.Type
    INT8: Schema.Type
    INT16: Schema.Type
    INT32: Schema.Type
    INT64: Schema.Type
    FLOAT: Schema.Type
    DOUBLE: Schema.Type
    DATE: Schema.Type
    TIME: Schema.Type
    TIMESTAMP: Schema.Type
    KEY_VALUE: Schema.Type
    INSTANT: Schema.Type
    LOCAL_DATE: Schema.Type
    LOCAL_TIME: Schema.Type
    LOCAL_DATE_TIME: Schema.Type
    PROTOBUF_NATIVE: Schema.Type
    AUTO_CONSUME: Schema.Type
    EXTERNAL: Schema.Type
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    name: str
    data: bytes
    type: Schema.Type
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    def __init__(self, name: _Optional[str] = ..., data: _Optional[bytes] = ..., type: _Optional[_Union[Schema.Type, str]] = ..., properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ...) -> None: ...

class MessageMetadata(_message.Message):
    __slots__ = ("producer_name", "sequence_id", "publish_time", "properties", "replicated_from", "partition_key", "replicate_to", "compression", "uncompressed_size", "num_messages_in_batch", "event_time", "encryption_keys", "encryption_algo", "encryption_param", "schema_version", "partition_key_b64_encoded", "ordering_key", "deliver_at_time", "marker_type", "txnid_least_bits", "txnid_most_bits", "highest_sequence_id", "null_value", "uuid", "num_chunks_from_msg", "total_chunk_msg_size", "chunk_id", "null_partition_key", "compacted_batch_indexes", "schema_id", "entry_hash_min", "entry_hash_max")
    PRODUCER_NAME_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_TIME_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    REPLICATED_FROM_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    REPLICATE_TO_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    UNCOMPRESSED_SIZE_FIELD_NUMBER: _ClassVar[int]
    NUM_MESSAGES_IN_BATCH_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTION_KEYS_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTION_ALGO_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTION_PARAM_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_B64_ENCODED_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    DELIVER_AT_TIME_FIELD_NUMBER: _ClassVar[int]
    MARKER_TYPE_FIELD_NUMBER: _ClassVar[int]
    TXNID_LEAST_BITS_FIELD_NUMBER: _ClassVar[int]
    TXNID_MOST_BITS_FIELD_NUMBER: _ClassVar[int]
    HIGHEST_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    NULL_VALUE_FIELD_NUMBER: _ClassVar[int]
    UUID_FIELD_NUMBER: _ClassVar[int]
    NUM_CHUNKS_FROM_MSG_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CHUNK_MSG_SIZE_FIELD_NUMBER: _ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    NULL_PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    COMPACTED_BATCH_INDEXES_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_ID_FIELD_NUMBER: _ClassVar[int]
    ENTRY_HASH_MIN_FIELD_NUMBER: _ClassVar[int]
    ENTRY_HASH_MAX_FIELD_NUMBER: _ClassVar[int]
    producer_name: str
    sequence_id: int
    publish_time: int
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    replicated_from: str
    partition_key: str
    replicate_to: _containers.RepeatedScalarFieldContainer[str]
    compression: CompressionType
    uncompressed_size: int
    num_messages_in_batch: int
    event_time: int
    encryption_keys: _containers.RepeatedCompositeFieldContainer[EncryptionKeys]
    encryption_algo: str
    encryption_param: bytes
    schema_version: bytes
    partition_key_b64_encoded: bool
    ordering_key: bytes
    deliver_at_time: int
    marker_type: int
    txnid_least_bits: int
    txnid_most_bits: int
    highest_sequence_id: int
    null_value: bool
    uuid: str
    num_chunks_from_msg: int
    total_chunk_msg_size: int
    chunk_id: int
    null_partition_key: bool
    compacted_batch_indexes: _containers.RepeatedScalarFieldContainer[int]
    schema_id: bytes
    entry_hash_min: int
    entry_hash_max: int
    def __init__(self, producer_name: _Optional[str] = ..., sequence_id: _Optional[int] = ..., publish_time: _Optional[int] = ..., properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., replicated_from: _Optional[str] = ..., partition_key: _Optional[str] = ..., replicate_to: _Optional[_Iterable[str]] = ..., compression: _Optional[_Union[CompressionType, str]] = ..., uncompressed_size: _Optional[int] = ..., num_messages_in_batch: _Optional[int] = ..., event_time: _Optional[int] = ..., encryption_keys: _Optional[_Iterable[_Union[EncryptionKeys, _Mapping]]] = ..., encryption_algo: _Optional[str] = ..., encryption_param: _Optional[bytes] = ..., schema_version: _Optional[bytes] = ..., partition_key_b64_encoded: _Optional[bool] = ..., ordering_key: _Optional[bytes] = ..., deliver_at_time: _Optional[int] = ..., marker_type: _Optional[int] = ..., txnid_least_bits: _Optional[int] = ..., txnid_most_bits: _Optional[int] = ..., highest_sequence_id: _Optional[int] = ..., null_value: _Optional[bool] = ..., uuid: _Optional[str] = ..., num_chunks_from_msg: _Optional[int] = ..., total_chunk_msg_size: _Optional[int] = ..., chunk_id: _Optional[int] = ..., null_partition_key: _Optional[bool] = ..., compacted_batch_indexes: _Optional[_Iterable[int]] = ..., schema_id: _Optional[bytes] = ..., entry_hash_min: _Optional[int] = ..., entry_hash_max: _Optional[int] = ...) -> None: ...

class SingleMessageMetadata(_message.Message):
    __slots__ = ("properties", "partition_key", "payload_size", "compacted_out", "event_time", "partition_key_b64_encoded", "ordering_key", "sequence_id", "null_value", "null_partition_key")
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_SIZE_FIELD_NUMBER: _ClassVar[int]
    COMPACTED_OUT_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    PARTITION_KEY_B64_ENCODED_FIELD_NUMBER: _ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    NULL_VALUE_FIELD_NUMBER: _ClassVar[int]
    NULL_PARTITION_KEY_FIELD_NUMBER: _ClassVar[int]
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    partition_key: str
    payload_size: int
    compacted_out: bool
    event_time: int
    partition_key_b64_encoded: bool
    ordering_key: bytes
    sequence_id: int
    null_value: bool
    null_partition_key: bool
    def __init__(self, properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., partition_key: _Optional[str] = ..., payload_size: _Optional[int] = ..., compacted_out: _Optional[bool] = ..., event_time: _Optional[int] = ..., partition_key_b64_encoded: _Optional[bool] = ..., ordering_key: _Optional[bytes] = ..., sequence_id: _Optional[int] = ..., null_value: _Optional[bool] = ..., null_partition_key: _Optional[bool] = ...) -> None: ...

class BrokerEntryMetadata(_message.Message):
    __slots__ = ("broker_timestamp", "index")
    BROKER_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    broker_timestamp: int
    index: int
    def __init__(self, broker_timestamp: _Optional[int] = ..., index: _Optional[int] = ...) -> None: ...

class FeatureFlags(_message.Message):
    __slots__ = ("supports_auth_refresh", "supports_broker_entry_metadata", "supports_partial_producer", "supports_topic_watchers", "supports_get_partitioned_metadata_without_auto_creation", "supports_repl_dedup_by_lid_and_eid", "supports_topic_watcher_reconcile", "supports_scalable_topics", "supports_tc_metadata_discovery")
    SUPPORTS_AUTH_REFRESH_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_BROKER_ENTRY_METADATA_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_PARTIAL_PRODUCER_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_TOPIC_WATCHERS_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_GET_PARTITIONED_METADATA_WITHOUT_AUTO_CREATION_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_REPL_DEDUP_BY_LID_AND_EID_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_TOPIC_WATCHER_RECONCILE_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_SCALABLE_TOPICS_FIELD_NUMBER: _ClassVar[int]
    SUPPORTS_TC_METADATA_DISCOVERY_FIELD_NUMBER: _ClassVar[int]
    supports_auth_refresh: bool
    supports_broker_entry_metadata: bool
    supports_partial_producer: bool
    supports_topic_watchers: bool
    supports_get_partitioned_metadata_without_auto_creation: bool
    supports_repl_dedup_by_lid_and_eid: bool
    supports_topic_watcher_reconcile: bool
    supports_scalable_topics: bool
    supports_tc_metadata_discovery: bool
    def __init__(self, supports_auth_refresh: _Optional[bool] = ..., supports_broker_entry_metadata: _Optional[bool] = ..., supports_partial_producer: _Optional[bool] = ..., supports_topic_watchers: _Optional[bool] = ..., supports_get_partitioned_metadata_without_auto_creation: _Optional[bool] = ..., supports_repl_dedup_by_lid_and_eid: _Optional[bool] = ..., supports_topic_watcher_reconcile: _Optional[bool] = ..., supports_scalable_topics: _Optional[bool] = ..., supports_tc_metadata_discovery: _Optional[bool] = ...) -> None: ...

class AuthData(_message.Message):
    __slots__ = ("auth_method_name", "auth_data")
    AUTH_METHOD_NAME_FIELD_NUMBER: _ClassVar[int]
    AUTH_DATA_FIELD_NUMBER: _ClassVar[int]
    auth_method_name: str
    auth_data: bytes
    def __init__(self, auth_method_name: _Optional[str] = ..., auth_data: _Optional[bytes] = ...) -> None: ...

class KeySharedMeta(_message.Message):
    __slots__ = ("key_shared_mode", "hash_ranges", "allow_out_of_order_delivery")
    KEY_SHARED_MODE_FIELD_NUMBER: _ClassVar[int]
    HASH_RANGES_FIELD_NUMBER: _ClassVar[int]
    ALLOW_OUT_OF_ORDER_DELIVERY_FIELD_NUMBER: _ClassVar[int]
    key_shared_mode: KeySharedMode
    hash_ranges: _containers.RepeatedCompositeFieldContainer[IntRange]
    allow_out_of_order_delivery: bool
    def __init__(self, key_shared_mode: _Optional[_Union[KeySharedMode, str]] = ..., hash_ranges: _Optional[_Iterable[_Union[IntRange, _Mapping]]] = ..., allow_out_of_order_delivery: _Optional[bool] = ...) -> None: ...

class Connect(_message.Message):
    __slots__ = ("client_version", "auth_method", "auth_data", "protocol_version", "auth_method_name", "proxy_to_broker_url", "original_principal", "original_auth_data", "original_auth_method", "feature_flags", "proxy_version")
    CLIENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    AUTH_METHOD_FIELD_NUMBER: _ClassVar[int]
    AUTH_DATA_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    AUTH_METHOD_NAME_FIELD_NUMBER: _ClassVar[int]
    PROXY_TO_BROKER_URL_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_AUTH_DATA_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_AUTH_METHOD_FIELD_NUMBER: _ClassVar[int]
    FEATURE_FLAGS_FIELD_NUMBER: _ClassVar[int]
    PROXY_VERSION_FIELD_NUMBER: _ClassVar[int]
    client_version: str
    auth_method: AuthMethod
    auth_data: bytes
    protocol_version: int
    auth_method_name: str
    proxy_to_broker_url: str
    original_principal: str
    original_auth_data: str
    original_auth_method: str
    feature_flags: FeatureFlags
    proxy_version: str
    def __init__(self, client_version: _Optional[str] = ..., auth_method: _Optional[_Union[AuthMethod, str]] = ..., auth_data: _Optional[bytes] = ..., protocol_version: _Optional[int] = ..., auth_method_name: _Optional[str] = ..., proxy_to_broker_url: _Optional[str] = ..., original_principal: _Optional[str] = ..., original_auth_data: _Optional[str] = ..., original_auth_method: _Optional[str] = ..., feature_flags: _Optional[_Union[FeatureFlags, _Mapping]] = ..., proxy_version: _Optional[str] = ...) -> None: ...

class Connected(_message.Message):
    __slots__ = ("server_version", "protocol_version", "max_message_size", "feature_flags")
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    FEATURE_FLAGS_FIELD_NUMBER: _ClassVar[int]
    server_version: str
    protocol_version: int
    max_message_size: int
    feature_flags: FeatureFlags
    def __init__(self, server_version: _Optional[str] = ..., protocol_version: _Optional[int] = ..., max_message_size: _Optional[int] = ..., feature_flags: _Optional[_Union[FeatureFlags, _Mapping]] = ...) -> None: ...

class AuthChallenge(_message.Message):
    __slots__ = ("server_version", "challenge", "protocol_version")
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    CHALLENGE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    server_version: str
    challenge: AuthData
    protocol_version: int
    def __init__(self, server_version: _Optional[str] = ..., challenge: _Optional[_Union[AuthData, _Mapping]] = ..., protocol_version: _Optional[int] = ...) -> None: ...

class AuthResponse(_message.Message):
    __slots__ = ("client_version", "response", "protocol_version")
    CLIENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    client_version: str
    response: AuthData
    protocol_version: int
    def __init__(self, client_version: _Optional[str] = ..., response: _Optional[_Union[AuthData, _Mapping]] = ..., protocol_version: _Optional[int] = ...) -> None: ...

class Ping(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Pong(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Success(_message.Message):
    __slots__ = ("request_id", "schema")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    schema: Schema
    def __init__(self, request_id: _Optional[int] = ..., schema: _Optional[_Union[Schema, _Mapping]] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("request_id", "error", "message")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    error: ServerError
    message: str
    def __init__(self, request_id: _Optional[int] = ..., error: _Optional[_Union[ServerError, str]] = ..., message: _Optional[str] = ...) -> None: ...

class Lookup(_message.Message):
    __slots__ = ("topic", "request_id", "authoritative", "original_principal", "original_auth_data", "original_auth_method", "advertised_listener_name", "properties")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHORITATIVE_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_AUTH_DATA_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_AUTH_METHOD_FIELD_NUMBER: _ClassVar[int]
    ADVERTISED_LISTENER_NAME_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    topic: str
    request_id: int
    authoritative: bool
    original_principal: str
    original_auth_data: str
    original_auth_method: str
    advertised_listener_name: str
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    def __init__(self, topic: _Optional[str] = ..., request_id: _Optional[int] = ..., authoritative: _Optional[bool] = ..., original_principal: _Optional[str] = ..., original_auth_data: _Optional[str] = ..., original_auth_method: _Optional[str] = ..., advertised_listener_name: _Optional[str] = ..., properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ...) -> None: ...

class LookupResponse(_message.Message):
    __slots__ = ("broker_service_url", "broker_service_url_tls", "response", "request_id", "authoritative", "error", "message", "proxy_through_service_url")
    class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        REDIRECT: _ClassVar[LookupResponse.Outcome]
        CONNECT: _ClassVar[LookupResponse.Outcome]
        FAILED: _ClassVar[LookupResponse.Outcome]
    REDIRECT: LookupResponse.Outcome
    CONNECT: LookupResponse.Outcome
    FAILED: LookupResponse.Outcome
    BROKER_SERVICE_URL_FIELD_NUMBER: _ClassVar[int]
    BROKER_SERVICE_URL_TLS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHORITATIVE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PROXY_THROUGH_SERVICE_URL_FIELD_NUMBER: _ClassVar[int]
    broker_service_url: str
    broker_service_url_tls: str
    response: LookupResponse.Outcome
    request_id: int
    authoritative: bool
    error: ServerError
    message: str
    proxy_through_service_url: bool
    def __init__(self, broker_service_url: _Optional[str] = ..., broker_service_url_tls: _Optional[str] = ..., response: _Optional[_Union[LookupResponse.Outcome, str]] = ..., request_id: _Optional[int] = ..., authoritative: _Optional[bool] = ..., error: _Optional[_Union[ServerError, str]] = ..., message: _Optional[str] = ..., proxy_through_service_url: _Optional[bool] = ...) -> None: ...

class PartitionedMetadata(_message.Message):
    __slots__ = ("topic", "request_id", "original_principal", "original_auth_data", "original_auth_method", "metadata_auto_creation_enabled")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_AUTH_DATA_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_AUTH_METHOD_FIELD_NUMBER: _ClassVar[int]
    METADATA_AUTO_CREATION_ENABLED_FIELD_NUMBER: _ClassVar[int]
    topic: str
    request_id: int
    original_principal: str
    original_auth_data: str
    original_auth_method: str
    metadata_auto_creation_enabled: bool
    def __init__(self, topic: _Optional[str] = ..., request_id: _Optional[int] = ..., original_principal: _Optional[str] = ..., original_auth_data: _Optional[str] = ..., original_auth_method: _Optional[str] = ..., metadata_auto_creation_enabled: _Optional[bool] = ...) -> None: ...

class PartitionedMetadataResponse(_message.Message):
    __slots__ = ("partitions", "request_id", "response", "error", "message")
    class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        SUCCESS: _ClassVar[PartitionedMetadataResponse.Outcome]
        FAILED: _ClassVar[PartitionedMetadataResponse.Outcome]
    SUCCESS: PartitionedMetadataResponse.Outcome
    FAILED: PartitionedMetadataResponse.Outcome
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    partitions: int
    request_id: int
    response: PartitionedMetadataResponse.Outcome
    error: ServerError
    message: str
    def __init__(self, partitions: _Optional[int] = ..., request_id: _Optional[int] = ..., response: _Optional[_Union[PartitionedMetadataResponse.Outcome, str]] = ..., error: _Optional[_Union[ServerError, str]] = ..., message: _Optional[str] = ...) -> None: ...

class GetTopicsOfNamespace(_message.Message):
    __slots__ = ("request_id", "namespace", "mode", "topics_pattern", "topics_hash", "properties")
    class Mode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        PERSISTENT: _ClassVar[GetTopicsOfNamespace.Mode]
        NON_PERSISTENT: _ClassVar[GetTopicsOfNamespace.Mode]
        ALL: _ClassVar[GetTopicsOfNamespace.Mode]
    PERSISTENT: GetTopicsOfNamespace.Mode
    NON_PERSISTENT: GetTopicsOfNamespace.Mode
    ALL: GetTopicsOfNamespace.Mode
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_PATTERN_FIELD_NUMBER: _ClassVar[int]
    TOPICS_HASH_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    namespace: str
    mode: GetTopicsOfNamespace.Mode
    topics_pattern: str
    topics_hash: str
    properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    def __init__(self, request_id: _Optional[int] = ..., namespace: _Optional[str] = ..., mode: _Optional[_Union[GetTopicsOfNamespace.Mode, str]] = ..., topics_pattern: _Optional[str] = ..., topics_hash: _Optional[str] = ..., properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ...) -> None: ...

class GetTopicsOfNamespaceResponse(_message.Message):
    __slots__ = ("request_id", "topics", "filtered", "topics_hash", "changed")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    FILTERED_FIELD_NUMBER: _ClassVar[int]
    TOPICS_HASH_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    topics: _containers.RepeatedScalarFieldContainer[str]
    filtered: bool
    topics_hash: str
    changed: bool
    def __init__(self, request_id: _Optional[int] = ..., topics: _Optional[_Iterable[str]] = ..., filtered: _Optional[bool] = ..., topics_hash: _Optional[str] = ..., changed: _Optional[bool] = ...) -> None: ...

class Producer(_message.Message):
    __slots__ = ("topic", "producer_id", "request_id", "producer_name", "encrypted", "metadata", "schema", "epoch", "user_provided_producer_name", "producer_access_mode", "topic_epoch", "txn_enabled", "initial_subscription_name")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_NAME_FIELD_NUMBER: _ClassVar[int]
    ENCRYPTED_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    USER_PROVIDED_PRODUCER_NAME_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ACCESS_MODE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TXN_ENABLED_FIELD_NUMBER: _ClassVar[int]
    INITIAL_SUBSCRIPTION_NAME_FIELD_NUMBER: _ClassVar[int]
    topic: str
    producer_id: int
    request_id: int
    producer_name: str
    encrypted: bool
    metadata: _containers.RepeatedCompositeFieldContainer[KeyValue]
    schema: Schema
    epoch: int
    user_provided_producer_name: bool
    producer_access_mode: ProducerAccessMode
    topic_epoch: int
    txn_enabled: bool
    initial_subscription_name: str
    def __init__(self, topic: _Optional[str] = ..., producer_id: _Optional[int] = ..., request_id: _Optional[int] = ..., producer_name: _Optional[str] = ..., encrypted: _Optional[bool] = ..., metadata: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., schema: _Optional[_Union[Schema, _Mapping]] = ..., epoch: _Optional[int] = ..., user_provided_producer_name: _Optional[bool] = ..., producer_access_mode: _Optional[_Union[ProducerAccessMode, str]] = ..., topic_epoch: _Optional[int] = ..., txn_enabled: _Optional[bool] = ..., initial_subscription_name: _Optional[str] = ...) -> None: ...

class ProducerSuccess(_message.Message):
    __slots__ = ("request_id", "producer_name", "last_sequence_id", "schema_version", "topic_epoch", "producer_ready")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_NAME_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    TOPIC_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_READY_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    producer_name: str
    last_sequence_id: int
    schema_version: bytes
    topic_epoch: int
    producer_ready: bool
    def __init__(self, request_id: _Optional[int] = ..., producer_name: _Optional[str] = ..., last_sequence_id: _Optional[int] = ..., schema_version: _Optional[bytes] = ..., topic_epoch: _Optional[int] = ..., producer_ready: _Optional[bool] = ...) -> None: ...

class Send(_message.Message):
    __slots__ = ("producer_id", "sequence_id", "num_messages", "txnid_least_bits", "txnid_most_bits", "highest_sequence_id", "is_chunk", "marker", "message_id")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TXNID_LEAST_BITS_FIELD_NUMBER: _ClassVar[int]
    TXNID_MOST_BITS_FIELD_NUMBER: _ClassVar[int]
    HIGHEST_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    IS_CHUNK_FIELD_NUMBER: _ClassVar[int]
    MARKER_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    sequence_id: int
    num_messages: int
    txnid_least_bits: int
    txnid_most_bits: int
    highest_sequence_id: int
    is_chunk: bool
    marker: bool
    message_id: MessageIdData
    def __init__(self, producer_id: _Optional[int] = ..., sequence_id: _Optional[int] = ..., num_messages: _Optional[int] = ..., txnid_least_bits: _Optional[int] = ..., txnid_most_bits: _Optional[int] = ..., highest_sequence_id: _Optional[int] = ..., is_chunk: _Optional[bool] = ..., marker: _Optional[bool] = ..., message_id: _Optional[_Union[MessageIdData, _Mapping]] = ...) -> None: ...

class SendReceipt(_message.Message):
    __slots__ = ("producer_id", "sequence_id", "message_id", "highest_sequence_id")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    HIGHEST_SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    sequence_id: int
    message_id: MessageIdData
    highest_sequence_id: int
    def __init__(self, producer_id: _Optional[int] = ..., sequence_id: _Optional[int] = ..., message_id: _Optional[_Union[MessageIdData, _Mapping]] = ..., highest_sequence_id: _Optional[int] = ...) -> None: ...

class SendError(_message.Message):
    __slots__ = ("producer_id", "sequence_id", "error", "message")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    sequence_id: int
    error: ServerError
    message: str
    def __init__(self, producer_id: _Optional[int] = ..., sequence_id: _Optional[int] = ..., error: _Optional[_Union[ServerError, str]] = ..., message: _Optional[str] = ...) -> None: ...

class CloseProducer(_message.Message):
    __slots__ = ("producer_id", "request_id", "assigned_broker_service_url", "assigned_broker_service_url_tls")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_BROKER_SERVICE_URL_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_BROKER_SERVICE_URL_TLS_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    request_id: int
    assigned_broker_service_url: str
    assigned_broker_service_url_tls: str
    def __init__(self, producer_id: _Optional[int] = ..., request_id: _Optional[int] = ..., assigned_broker_service_url: _Optional[str] = ..., assigned_broker_service_url_tls: _Optional[str] = ...) -> None: ...

class Subscribe(_message.Message):
    __slots__ = ("topic", "subscription", "sub_type", "consumer_id", "request_id", "consumer_name", "priority_level", "durable", "start_message_id", "metadata", "read_compacted", "schema", "initial_position", "replicate_subscription_state", "force_topic_creation", "start_message_rollback_duration_sec", "key_shared_meta", "subscription_properties", "consumer_epoch")
    class SubType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        EXCLUSIVE: _ClassVar[Subscribe.SubType]
        SHARED: _ClassVar[Subscribe.SubType]
        FAILOVER: _ClassVar[Subscribe.SubType]
        KEY_SHARED: _ClassVar[Subscribe.SubType]
    EXCLUSIVE: Subscribe.SubType
    SHARED: Subscribe.SubType
    FAILOVER: Subscribe.SubType
    KEY_SHARED: Subscribe.SubType
    class InitialPosition(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        LATEST: _ClassVar[Subscribe.InitialPosition]
        EARLIEST: _ClassVar[Subscribe.InitialPosition]
    LATEST: Subscribe.InitialPosition
    EARLIEST: Subscribe.InitialPosition
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SUB_TYPE_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_NAME_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_LEVEL_FIELD_NUMBER: _ClassVar[int]
    DURABLE_FIELD_NUMBER: _ClassVar[int]
    START_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    READ_COMPACTED_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    INITIAL_POSITION_FIELD_NUMBER: _ClassVar[int]
    REPLICATE_SUBSCRIPTION_STATE_FIELD_NUMBER: _ClassVar[int]
    FORCE_TOPIC_CREATION_FIELD_NUMBER: _ClassVar[int]
    START_MESSAGE_ROLLBACK_DURATION_SEC_FIELD_NUMBER: _ClassVar[int]
    KEY_SHARED_META_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    subscription: str
    sub_type: Subscribe.SubType
    consumer_id: int
    request_id: int
    consumer_name: str
    priority_level: int
    durable: bool
    start_message_id: MessageIdData
    metadata: _containers.RepeatedCompositeFieldContainer[KeyValue]
    read_compacted: bool
    schema: Schema
    initial_position: Subscribe.InitialPosition
    replicate_subscription_state: bool
    force_topic_creation: bool
    start_message_rollback_duration_sec: int
    key_shared_meta: KeySharedMeta
    subscription_properties: _containers.RepeatedCompositeFieldContainer[KeyValue]
    consumer_epoch: int
    def __init__(self, topic: _Optional[str] = ..., subscription: _Optional[str] = ..., sub_type: _Optional[_Union[Subscribe.SubType, str]] = ..., consumer_id: _Optional[int] = ..., request_id: _Optional[int] = ..., consumer_name: _Optional[str] = ..., priority_level: _Optional[int] = ..., durable: _Optional[bool] = ..., start_message_id: _Optional[_Union[MessageIdData, _Mapping]] = ..., metadata: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., read_compacted: _Optional[bool] = ..., schema: _Optional[_Union[Schema, _Mapping]] = ..., initial_position: _Optional[_Union[Subscribe.InitialPosition, str]] = ..., replicate_subscription_state: _Optional[bool] = ..., force_topic_creation: _Optional[bool] = ..., start_message_rollback_duration_sec: _Optional[int] = ..., key_shared_meta: _Optional[_Union[KeySharedMeta, _Mapping]] = ..., subscription_properties: _Optional[_Iterable[_Union[KeyValue, _Mapping]]] = ..., consumer_epoch: _Optional[int] = ...) -> None: ...

class Flow(_message.Message):
    __slots__ = ("consumer_id", "message_permits")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_PERMITS_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    message_permits: int
    def __init__(self, consumer_id: _Optional[int] = ..., message_permits: _Optional[int] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("consumer_id", "message_id", "redelivery_count", "ack_set", "consumer_epoch")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REDELIVERY_COUNT_FIELD_NUMBER: _ClassVar[int]
    ACK_SET_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    message_id: MessageIdData
    redelivery_count: int
    ack_set: _containers.RepeatedScalarFieldContainer[int]
    consumer_epoch: int
    def __init__(self, consumer_id: _Optional[int] = ..., message_id: _Optional[_Union[MessageIdData, _Mapping]] = ..., redelivery_count: _Optional[int] = ..., ack_set: _Optional[_Iterable[int]] = ..., consumer_epoch: _Optional[int] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ("consumer_id", "ack_type", "message_id", "validation_error", "properties", "txnid_least_bits", "txnid_most_bits", "request_id")
    class AckType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        INDIVIDUAL: _ClassVar[Ack.AckType]
        CUMULATIVE: _ClassVar[Ack.AckType]
    INDIVIDUAL: Ack.AckType
    CUMULATIVE: Ack.AckType
    class ValidationError(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNCOMPRESSED_SIZE_CORRUPTION: _ClassVar[Ack.ValidationError]
        DECOMPRESSION_ERROR: _ClassVar[Ack.ValidationError]
        CHECKSUM_MISMATCH: _ClassVar[Ack.ValidationError]
        BATCH_DESERIALIZE_ERROR: _ClassVar[Ack.ValidationError]
        DECRYPTION_ERROR: _ClassVar[Ack.ValidationError]
    UNCOMPRESSED_SIZE_CORRUPTION: Ack.ValidationError
    DECOMPRESSION_ERROR: Ack.ValidationError
    CHECKSUM_MISMATCH: Ack.ValidationError
    BATCH_DESERIALIZE_ERROR: Ack.ValidationError
    DECRYPTION_ERROR: Ack.ValidationError
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    ACK_TYPE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    VALIDATION_ERROR_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    TXNID_LEAST_BITS_FIELD_NUMBER: _ClassVar[int]
    TXNID_MOST_BITS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    ack_type: Ack.AckType
    message_id: _containers.RepeatedCompositeFieldContainer[MessageIdData]
    validation_error: Ack.ValidationError
    properties: _containers.RepeatedCompositeFieldContainer[KeyLongValue]
    txnid_least_bits: int
    txnid_most_bits: int
    request_id: int
    def __init__(self, consumer_id: _Optional[int] = ..., ack_type: _Optional[_Union[Ack.AckType, str]] = ..., message_id: _Optional[_Iterable[_Union[MessageIdData, _Mapping]]] = ..., validation_error: _Optional[_Union[Ack.ValidationError, str]] = ..., properties: _Optional[_Iterable[_Union[KeyLongValue, _Mapping]]] = ..., txnid_least_bits: _Optional[int] = ..., txnid_most_bits: _Optional[int] = ..., request_id: _Optional[int] = ...) -> None: ...

class AckResponse(_message.Message):
    __slots__ = ("consumer_id", "txnid_least_bits", "txnid_most_bits", "error", "message", "request_id")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    TXNID_LEAST_BITS_FIELD_NUMBER: _ClassVar[int]
    TXNID_MOST_BITS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    txnid_least_bits: int
    txnid_most_bits: int
    error: ServerError
    message: str
    request_id: int
    def __init__(self, consumer_id: _Optional[int] = ..., txnid_least_bits: _Optional[int] = ..., txnid_most_bits: _Optional[int] = ..., error: _Optional[_Union[ServerError, str]] = ..., message: _Optional[str] = ..., request_id: _Optional[int] = ...) -> None: ...

class RedeliverUnacknowledgedMessages(_message.Message):
    __slots__ = ("consumer_id", "message_ids", "consumer_epoch")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    message_ids: _containers.RepeatedCompositeFieldContainer[MessageIdData]
    consumer_epoch: int
    def __init__(self, consumer_id: _Optional[int] = ..., message_ids: _Optional[_Iterable[_Union[MessageIdData, _Mapping]]] = ..., consumer_epoch: _Optional[int] = ...) -> None: ...

class Seek(_message.Message):
    __slots__ = ("consumer_id", "request_id", "message_id", "message_publish_time")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_PUBLISH_TIME_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    request_id: int
    message_id: MessageIdData
    message_publish_time: int
    def __init__(self, consumer_id: _Optional[int] = ..., request_id: _Optional[int] = ..., message_id: _Optional[_Union[MessageIdData, _Mapping]] = ..., message_publish_time: _Optional[int] = ...) -> None: ...

class Unsubscribe(_message.Message):
    __slots__ = ("consumer_id", "request_id", "force")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    request_id: int
    force: bool
    def __init__(self, consumer_id: _Optional[int] = ..., request_id: _Optional[int] = ..., force: _Optional[bool] = ...) -> None: ...

class CloseConsumer(_message.Message):
    __slots__ = ("consumer_id", "request_id", "assigned_broker_service_url", "assigned_broker_service_url_tls")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_BROKER_SERVICE_URL_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_BROKER_SERVICE_URL_TLS_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    request_id: int
    assigned_broker_service_url: str
    assigned_broker_service_url_tls: str
    def __init__(self, consumer_id: _Optional[int] = ..., request_id: _Optional[int] = ..., assigned_broker_service_url: _Optional[str] = ..., assigned_broker_service_url_tls: _Optional[str] = ...) -> None: ...

class GetLastMessageId(_message.Message):
    __slots__ = ("consumer_id", "request_id")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    request_id: int
    def __init__(self, consumer_id: _Optional[int] = ..., request_id: _Optional[int] = ...) -> None: ...

class GetLastMessageIdResponse(_message.Message):
    __slots__ = ("last_message_id", "request_id", "consumer_mark_delete_position")
    LAST_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_MARK_DELETE_POSITION_FIELD_NUMBER: _ClassVar[int]
    last_message_id: MessageIdData
    request_id: int
    consumer_mark_delete_position: MessageIdData
    def __init__(self, last_message_id: _Optional[_Union[MessageIdData, _Mapping]] = ..., request_id: _Optional[int] = ..., consumer_mark_delete_position: _Optional[_Union[MessageIdData, _Mapping]] = ...) -> None: ...

class ActiveConsumerChange(_message.Message):
    __slots__ = ("consumer_id", "is_active")
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    IS_ACTIVE_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    is_active: bool
    def __init__(self, consumer_id: _Optional[int] = ..., is_active: _Optional[bool] = ...) -> None: ...

class ReachedEndOfTopic(_message.Message):
    __slots__ = ("consumer_id",)
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    consumer_id: int
    def __init__(self, consumer_id: _Optional[int] = ...) -> None: ...

class ConsumerStats(_message.Message):
    __slots__ = ("request_id", "consumer_id")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    consumer_id: int
    def __init__(self, request_id: _Optional[int] = ..., consumer_id: _Optional[int] = ...) -> None: ...

class ConsumerStatsResponse(_message.Message):
    __slots__ = ("request_id", "error_code", "error_message", "msg_rate_out", "msg_throughput_out", "msg_rate_redeliver", "consumer_name", "available_permits", "unacked_messages", "blocked_consumer_on_unacked_msgs", "address", "connected_since", "subscription_type", "msg_rate_expired", "msg_backlog", "message_ack_rate")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MSG_RATE_OUT_FIELD_NUMBER: _ClassVar[int]
    MSG_THROUGHPUT_OUT_FIELD_NUMBER: _ClassVar[int]
    MSG_RATE_REDELIVER_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_NAME_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_PERMITS_FIELD_NUMBER: _ClassVar[int]
    UNACKED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    BLOCKED_CONSUMER_ON_UNACKED_MSGS_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_SINCE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    MSG_RATE_EXPIRED_FIELD_NUMBER: _ClassVar[int]
    MSG_BACKLOG_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ACK_RATE_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    error_code: ServerError
    error_message: str
    msg_rate_out: float
    msg_throughput_out: float
    msg_rate_redeliver: float
    consumer_name: str
    available_permits: int
    unacked_messages: int
    blocked_consumer_on_unacked_msgs: bool
    address: str
    connected_since: str
    subscription_type: str
    msg_rate_expired: float
    msg_backlog: int
    message_ack_rate: float
    def __init__(self, request_id: _Optional[int] = ..., error_code: _Optional[_Union[ServerError, str]] = ..., error_message: _Optional[str] = ..., msg_rate_out: _Optional[float] = ..., msg_throughput_out: _Optional[float] = ..., msg_rate_redeliver: _Optional[float] = ..., consumer_name: _Optional[str] = ..., available_permits: _Optional[int] = ..., unacked_messages: _Optional[int] = ..., blocked_consumer_on_unacked_msgs: _Optional[bool] = ..., address: _Optional[str] = ..., connected_since: _Optional[str] = ..., subscription_type: _Optional[str] = ..., msg_rate_expired: _Optional[float] = ..., msg_backlog: _Optional[int] = ..., message_ack_rate: _Optional[float] = ...) -> None: ...

class GetSchema(_message.Message):
    __slots__ = ("request_id", "topic", "schema_version")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    topic: str
    schema_version: bytes
    def __init__(self, request_id: _Optional[int] = ..., topic: _Optional[str] = ..., schema_version: _Optional[bytes] = ...) -> None: ...

class GetSchemaResponse(_message.Message):
    __slots__ = ("request_id", "error_code", "error_message", "schema", "schema_version")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    error_code: ServerError
    error_message: str
    schema: Schema
    schema_version: bytes
    def __init__(self, request_id: _Optional[int] = ..., error_code: _Optional[_Union[ServerError, str]] = ..., error_message: _Optional[str] = ..., schema: _Optional[_Union[Schema, _Mapping]] = ..., schema_version: _Optional[bytes] = ...) -> None: ...

class GetOrCreateSchema(_message.Message):
    __slots__ = ("request_id", "topic", "schema", "producer_name")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_NAME_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    topic: str
    schema: Schema
    producer_name: str
    def __init__(self, request_id: _Optional[int] = ..., topic: _Optional[str] = ..., schema: _Optional[_Union[Schema, _Mapping]] = ..., producer_name: _Optional[str] = ...) -> None: ...

class GetOrCreateSchemaResponse(_message.Message):
    __slots__ = ("request_id", "error_code", "error_message", "schema_version")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    error_code: ServerError
    error_message: str
    schema_version: bytes
    def __init__(self, request_id: _Optional[int] = ..., error_code: _Optional[_Union[ServerError, str]] = ..., error_message: _Optional[str] = ..., schema_version: _Optional[bytes] = ...) -> None: ...

class TcClientConnectRequest(_message.Message):
    __slots__ = ("request_id", "tc_id")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TC_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    tc_id: int
    def __init__(self, request_id: _Optional[int] = ..., tc_id: _Optional[int] = ...) -> None: ...

class TcClientConnectResponse(_message.Message):
    __slots__ = ("request_id", "error", "message")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    error: ServerError
    message: str
    def __init__(self, request_id: _Optional[int] = ..., error: _Optional[_Union[ServerError, str]] = ..., message: _Optional[str] = ...) -> None: ...

class BaseCommand(_message.Message):
    __slots__ = ("type", "connect", "connected", "subscribe", "producer", "send", "send_receipt", "send_error", "message", "ack", "flow", "unsubscribe", "success", "error", "close_producer", "close_consumer", "producer_success", "ping", "pong", "redeliver_unacknowledged_messages", "partitioned_metadata", "partitioned_metadata_response", "lookup", "lookup_response", "consumer_stats", "consumer_stats_response", "reached_end_of_topic", "seek", "get_last_message_id", "get_last_message_id_response", "active_consumer_change", "get_topics_of_namespace", "get_topics_of_namespace_response", "get_schema", "get_schema_response", "auth_challenge", "auth_response", "ack_response", "get_or_create_schema", "get_or_create_schema_response", "tc_client_connect_request", "tc_client_connect_response")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        CONNECT: _ClassVar[BaseCommand.Type]
        CONNECTED: _ClassVar[BaseCommand.Type]
        SUBSCRIBE: _ClassVar[BaseCommand.Type]
        PRODUCER: _ClassVar[BaseCommand.Type]
        SEND: _ClassVar[BaseCommand.Type]
        SEND_RECEIPT: _ClassVar[BaseCommand.Type]
        SEND_ERROR: _ClassVar[BaseCommand.Type]
        MESSAGE: _ClassVar[BaseCommand.Type]
        ACK: _ClassVar[BaseCommand.Type]
        FLOW: _ClassVar[BaseCommand.Type]
        UNSUBSCRIBE: _ClassVar[BaseCommand.Type]
        SUCCESS: _ClassVar[BaseCommand.Type]
        ERROR: _ClassVar[BaseCommand.Type]
        CLOSE_PRODUCER: _ClassVar[BaseCommand.Type]
        CLOSE_CONSUMER: _ClassVar[BaseCommand.Type]
        PRODUCER_SUCCESS: _ClassVar[BaseCommand.Type]
        PING: _ClassVar[BaseCommand.Type]
        PONG: _ClassVar[BaseCommand.Type]
        REDELIVER_UNACKNOWLEDGED_MESSAGES: _ClassVar[BaseCommand.Type]
        PARTITIONED_METADATA: _ClassVar[BaseCommand.Type]
        PARTITIONED_METADATA_RESPONSE: _ClassVar[BaseCommand.Type]
        LOOKUP: _ClassVar[BaseCommand.Type]
        LOOKUP_RESPONSE: _ClassVar[BaseCommand.Type]
        CONSUMER_STATS: _ClassVar[BaseCommand.Type]
        CONSUMER_STATS_RESPONSE: _ClassVar[BaseCommand.Type]
        REACHED_END_OF_TOPIC: _ClassVar[BaseCommand.Type]
        SEEK: _ClassVar[BaseCommand.Type]
        GET_LAST_MESSAGE_ID: _ClassVar[BaseCommand.Type]
        GET_LAST_MESSAGE_ID_RESPONSE: _ClassVar[BaseCommand.Type]
        ACTIVE_CONSUMER_CHANGE: _ClassVar[BaseCommand.Type]
        GET_TOPICS_OF_NAMESPACE: _ClassVar[BaseCommand.Type]
        GET_TOPICS_OF_NAMESPACE_RESPONSE: _ClassVar[BaseCommand.Type]
        GET_SCHEMA: _ClassVar[BaseCommand.Type]
        GET_SCHEMA_RESPONSE: _ClassVar[BaseCommand.Type]
        AUTH_CHALLENGE: _ClassVar[BaseCommand.Type]
        AUTH_RESPONSE: _ClassVar[BaseCommand.Type]
        ACK_RESPONSE: _ClassVar[BaseCommand.Type]
        GET_OR_CREATE_SCHEMA: _ClassVar[BaseCommand.Type]
        GET_OR_CREATE_SCHEMA_RESPONSE: _ClassVar[BaseCommand.Type]
        NEW_TXN: _ClassVar[BaseCommand.Type]
        NEW_TXN_RESPONSE: _ClassVar[BaseCommand.Type]
        ADD_PARTITION_TO_TXN: _ClassVar[BaseCommand.Type]
        ADD_PARTITION_TO_TXN_RESPONSE: _ClassVar[BaseCommand.Type]
        ADD_SUBSCRIPTION_TO_TXN: _ClassVar[BaseCommand.Type]
        ADD_SUBSCRIPTION_TO_TXN_RESPONSE: _ClassVar[BaseCommand.Type]
        END_TXN: _ClassVar[BaseCommand.Type]
        END_TXN_RESPONSE: _ClassVar[BaseCommand.Type]
        END_TXN_ON_PARTITION: _ClassVar[BaseCommand.Type]
        END_TXN_ON_PARTITION_RESPONSE: _ClassVar[BaseCommand.Type]
        END_TXN_ON_SUBSCRIPTION: _ClassVar[BaseCommand.Type]
        END_TXN_ON_SUBSCRIPTION_RESPONSE: _ClassVar[BaseCommand.Type]
        TC_CLIENT_CONNECT_REQUEST: _ClassVar[BaseCommand.Type]
        TC_CLIENT_CONNECT_RESPONSE: _ClassVar[BaseCommand.Type]
        WATCH_TOPIC_LIST: _ClassVar[BaseCommand.Type]
        WATCH_TOPIC_LIST_SUCCESS: _ClassVar[BaseCommand.Type]
        WATCH_TOPIC_UPDATE: _ClassVar[BaseCommand.Type]
        WATCH_TOPIC_LIST_CLOSE: _ClassVar[BaseCommand.Type]
        TOPIC_MIGRATED: _ClassVar[BaseCommand.Type]
    CONNECT: BaseCommand.Type
    CONNECTED: BaseCommand.Type
    SUBSCRIBE: BaseCommand.Type
    PRODUCER: BaseCommand.Type
    SEND: BaseCommand.Type
    SEND_RECEIPT: BaseCommand.Type
    SEND_ERROR: BaseCommand.Type
    MESSAGE: BaseCommand.Type
    ACK: BaseCommand.Type
    FLOW: BaseCommand.Type
    UNSUBSCRIBE: BaseCommand.Type
    SUCCESS: BaseCommand.Type
    ERROR: BaseCommand.Type
    CLOSE_PRODUCER: BaseCommand.Type
    CLOSE_CONSUMER: BaseCommand.Type
    PRODUCER_SUCCESS: BaseCommand.Type
    PING: BaseCommand.Type
    PONG: BaseCommand.Type
    REDELIVER_UNACKNOWLEDGED_MESSAGES: BaseCommand.Type
    PARTITIONED_METADATA: BaseCommand.Type
    PARTITIONED_METADATA_RESPONSE: BaseCommand.Type
    LOOKUP: BaseCommand.Type
    LOOKUP_RESPONSE: BaseCommand.Type
    CONSUMER_STATS: BaseCommand.Type
    CONSUMER_STATS_RESPONSE: BaseCommand.Type
    REACHED_END_OF_TOPIC: BaseCommand.Type
    SEEK: BaseCommand.Type
    GET_LAST_MESSAGE_ID: BaseCommand.Type
    GET_LAST_MESSAGE_ID_RESPONSE: BaseCommand.Type
    ACTIVE_CONSUMER_CHANGE: BaseCommand.Type
    GET_TOPICS_OF_NAMESPACE: BaseCommand.Type
    GET_TOPICS_OF_NAMESPACE_RESPONSE: BaseCommand.Type
    GET_SCHEMA: BaseCommand.Type
    GET_SCHEMA_RESPONSE: BaseCommand.Type
    AUTH_CHALLENGE: BaseCommand.Type
    AUTH_RESPONSE: BaseCommand.Type
    ACK_RESPONSE: BaseCommand.Type
    GET_OR_CREATE_SCHEMA: BaseCommand.Type
    GET_OR_CREATE_SCHEMA_RESPONSE: BaseCommand.Type
    NEW_TXN: BaseCommand.Type
    NEW_TXN_RESPONSE: BaseCommand.Type
    ADD_PARTITION_TO_TXN: BaseCommand.Type
    ADD_PARTITION_TO_TXN_RESPONSE: BaseCommand.Type
    ADD_SUBSCRIPTION_TO_TXN: BaseCommand.Type
    ADD_SUBSCRIPTION_TO_TXN_RESPONSE: BaseCommand.Type
    END_TXN: BaseCommand.Type
    END_TXN_RESPONSE: BaseCommand.Type
    END_TXN_ON_PARTITION: BaseCommand.Type
    END_TXN_ON_PARTITION_RESPONSE: BaseCommand.Type
    END_TXN_ON_SUBSCRIPTION: BaseCommand.Type
    END_TXN_ON_SUBSCRIPTION_RESPONSE: BaseCommand.Type
    TC_CLIENT_CONNECT_REQUEST: BaseCommand.Type
    TC_CLIENT_CONNECT_RESPONSE: BaseCommand.Type
    WATCH_TOPIC_LIST: BaseCommand.Type
    WATCH_TOPIC_LIST_SUCCESS: BaseCommand.Type
    WATCH_TOPIC_UPDATE: BaseCommand.Type
    WATCH_TOPIC_LIST_CLOSE: BaseCommand.Type
    TOPIC_MIGRATED: BaseCommand.Type
    TYPE_FIELD_NUMBER: _ClassVar[int]
    CONNECT_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    SEND_FIELD_NUMBER: _ClassVar[int]
    SEND_RECEIPT_FIELD_NUMBER: _ClassVar[int]
    SEND_ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    FLOW_FIELD_NUMBER: _ClassVar[int]
    UNSUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CLOSE_PRODUCER_FIELD_NUMBER: _ClassVar[int]
    CLOSE_CONSUMER_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_SUCCESS_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    PONG_FIELD_NUMBER: _ClassVar[int]
    REDELIVER_UNACKNOWLEDGED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PARTITIONED_METADATA_FIELD_NUMBER: _ClassVar[int]
    PARTITIONED_METADATA_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    LOOKUP_FIELD_NUMBER: _ClassVar[int]
    LOOKUP_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_STATS_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_STATS_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    REACHED_END_OF_TOPIC_FIELD_NUMBER: _ClassVar[int]
    SEEK_FIELD_NUMBER: _ClassVar[int]
    GET_LAST_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    GET_LAST_MESSAGE_ID_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_CONSUMER_CHANGE_FIELD_NUMBER: _ClassVar[int]
    GET_TOPICS_OF_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    GET_TOPICS_OF_NAMESPACE_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    GET_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    GET_SCHEMA_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    AUTH_CHALLENGE_FIELD_NUMBER: _ClassVar[int]
    AUTH_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ACK_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    GET_OR_CREATE_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    GET_OR_CREATE_SCHEMA_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    TC_CLIENT_CONNECT_REQUEST_FIELD_NUMBER: _ClassVar[int]
    TC_CLIENT_CONNECT_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    type: BaseCommand.Type
    connect: Connect
    connected: Connected
    subscribe: Subscribe
    producer: Producer
    send: Send
    send_receipt: SendReceipt
    send_error: SendError
    message: Message
    ack: Ack
    flow: Flow
    unsubscribe: Unsubscribe
    success: Success
    error: Error
    close_producer: CloseProducer
    close_consumer: CloseConsumer
    producer_success: ProducerSuccess
    ping: Ping
    pong: Pong
    redeliver_unacknowledged_messages: RedeliverUnacknowledgedMessages
    partitioned_metadata: PartitionedMetadata
    partitioned_metadata_response: PartitionedMetadataResponse
    lookup: Lookup
    lookup_response: LookupResponse
    consumer_stats: ConsumerStats
    consumer_stats_response: ConsumerStatsResponse
    reached_end_of_topic: ReachedEndOfTopic
    seek: Seek
    get_last_message_id: GetLastMessageId
    get_last_message_id_response: GetLastMessageIdResponse
    active_consumer_change: ActiveConsumerChange
    get_topics_of_namespace: GetTopicsOfNamespace
    get_topics_of_namespace_response: GetTopicsOfNamespaceResponse
    get_schema: GetSchema
    get_schema_response: GetSchemaResponse
    auth_challenge: AuthChallenge
    auth_response: AuthResponse
    ack_response: AckResponse
    get_or_create_schema: GetOrCreateSchema
    get_or_create_schema_response: GetOrCreateSchemaResponse
    tc_client_connect_request: TcClientConnectRequest
    tc_client_connect_response: TcClientConnectResponse
    def __init__(self, type: _Optional[_Union[BaseCommand.Type, str]] = ..., connect: _Optional[_Union[Connect, _Mapping]] = ..., connected: _Optional[_Union[Connected, _Mapping]] = ..., subscribe: _Optional[_Union[Subscribe, _Mapping]] = ..., producer: _Optional[_Union[Producer, _Mapping]] = ..., send: _Optional[_Union[Send, _Mapping]] = ..., send_receipt: _Optional[_Union[SendReceipt, _Mapping]] = ..., send_error: _Optional[_Union[SendError, _Mapping]] = ..., message: _Optional[_Union[Message, _Mapping]] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ..., flow: _Optional[_Union[Flow, _Mapping]] = ..., unsubscribe: _Optional[_Union[Unsubscribe, _Mapping]] = ..., success: _Optional[_Union[Success, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., close_producer: _Optional[_Union[CloseProducer, _Mapping]] = ..., close_consumer: _Optional[_Union[CloseConsumer, _Mapping]] = ..., producer_success: _Optional[_Union[ProducerSuccess, _Mapping]] = ..., ping: _Optional[_Union[Ping, _Mapping]] = ..., pong: _Optional[_Union[Pong, _Mapping]] = ..., redeliver_unacknowledged_messages: _Optional[_Union[RedeliverUnacknowledgedMessages, _Mapping]] = ..., partitioned_metadata: _Optional[_Union[PartitionedMetadata, _Mapping]] = ..., partitioned_metadata_response: _Optional[_Union[PartitionedMetadataResponse, _Mapping]] = ..., lookup: _Optional[_Union[Lookup, _Mapping]] = ..., lookup_response: _Optional[_Union[LookupResponse, _Mapping]] = ..., consumer_stats: _Optional[_Union[ConsumerStats, _Mapping]] = ..., consumer_stats_response: _Optional[_Union[ConsumerStatsResponse, _Mapping]] = ..., reached_end_of_topic: _Optional[_Union[ReachedEndOfTopic, _Mapping]] = ..., seek: _Optional[_Union[Seek, _Mapping]] = ..., get_last_message_id: _Optional[_Union[GetLastMessageId, _Mapping]] = ..., get_last_message_id_response: _Optional[_Union[GetLastMessageIdResponse, _Mapping]] = ..., active_consumer_change: _Optional[_Union[ActiveConsumerChange, _Mapping]] = ..., get_topics_of_namespace: _Optional[_Union[GetTopicsOfNamespace, _Mapping]] = ..., get_topics_of_namespace_response: _Optional[_Union[GetTopicsOfNamespaceResponse, _Mapping]] = ..., get_schema: _Optional[_Union[GetSchema, _Mapping]] = ..., get_schema_response: _Optional[_Union[GetSchemaResponse, _Mapping]] = ..., auth_challenge: _Optional[_Union[AuthChallenge, _Mapping]] = ..., auth_response: _Optional[_Union[AuthResponse, _Mapping]] = ..., ack_response: _Optional[_Union[AckResponse, _Mapping]] = ..., get_or_create_schema: _Optional[_Union[GetOrCreateSchema, _Mapping]] = ..., get_or_create_schema_response: _Optional[_Union[GetOrCreateSchemaResponse, _Mapping]] = ..., tc_client_connect_request: _Optional[_Union[TcClientConnectRequest, _Mapping]] = ..., tc_client_connect_response: _Optional[_Union[TcClientConnectResponse, _Mapping]] = ...) -> None: ...
