"""The Pulsar commands georep declares: a registry, builders, and error replies.

Every frame carries one :class:`BaseCommand` whose ``type`` names the one body field that
is set. :data:`REGISTRY` maps each type of the subset to a :class:`CommandSpec`: the body
field, its message class, who may send it, and whether a payload follows it. The broker
dispatches on this table; a type missing from it is outside the subset (the decoder
reports it as :class:`~georep.wire.errors.UnknownCommand`).

The naming rule of ``pulsar_wire.proto`` is checked when this module is imported: type
``GET_LAST_MESSAGE_ID`` (29) travels in field ``get_last_message_id`` (number 29) whose
message is ``GetLastMessageId``. A schema edit that breaks it stops the import.

Builders return whole BaseCommands ready for :func:`frames.encode_command`::

    >>> partitioned_metadata_response(request_id=7, partitions=4).partitioned_metadata_response
    partitions: 4
    request_id: 7
    response: SUCCESS
    <BLANKLINE>

:func:`error_reply` answers any request with the failure its type expects (ERROR for
most, SEND_ERROR for SEND, a FAILED lookup for LOOKUP, ...), so a broker can refuse a
command in one line.
"""

from __future__ import annotations

import builtins
import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from google.protobuf.message import Message as ProtobufMessage

from georep.invariant import InvariantViolation, invariant
from georep.wire import pulsar_wire_pb2 as pb

Type = pb.BaseCommand.Type


class Sender(enum.Flag):
    """Which side of a connection may send a command."""

    CLIENT = enum.auto()
    BROKER = enum.auto()
    EITHER = CLIENT | BROKER


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """One command of the subset: how it travels and who sends it."""

    type: int
    #: Field of BaseCommand that carries the body.
    field: str
    #: Generated message class of the body.
    body: builtins.type[ProtobufMessage]
    sender: Sender
    #: True for SEND and MESSAGE: MessageMetadata and a payload follow the command.
    carries_payload: bool = False

    @property
    def name(self) -> str:
        return Type.Name(self.type)

    @property
    def body_may_be_absent(self) -> bool:
        """A body with no fields at all (PING, PONG) may be left out of the frame."""
        return not self.body.DESCRIPTOR.fields


_C, _B, _E = Sender.CLIENT, Sender.BROKER, Sender.EITHER

REGISTRY: dict[int, CommandSpec] = {
    spec.type: spec
    for spec in (
        # connection
        CommandSpec(Type.CONNECT, "connect", pb.Connect, _C),
        CommandSpec(Type.CONNECTED, "connected", pb.Connected, _B),
        CommandSpec(Type.AUTH_CHALLENGE, "auth_challenge", pb.AuthChallenge, _B),
        CommandSpec(Type.AUTH_RESPONSE, "auth_response", pb.AuthResponse, _C),
        CommandSpec(Type.PING, "ping", pb.Ping, _E),
        CommandSpec(Type.PONG, "pong", pb.Pong, _E),
        CommandSpec(Type.SUCCESS, "success", pb.Success, _B),
        CommandSpec(Type.ERROR, "error", pb.Error, _B),
        # discovery
        CommandSpec(Type.LOOKUP, "lookup", pb.Lookup, _C),
        CommandSpec(Type.LOOKUP_RESPONSE, "lookup_response", pb.LookupResponse, _B),
        CommandSpec(Type.PARTITIONED_METADATA, "partitioned_metadata", pb.PartitionedMetadata, _C),
        CommandSpec(
            Type.PARTITIONED_METADATA_RESPONSE,
            "partitioned_metadata_response",
            pb.PartitionedMetadataResponse,
            _B,
        ),
        CommandSpec(
            Type.GET_TOPICS_OF_NAMESPACE, "get_topics_of_namespace", pb.GetTopicsOfNamespace, _C
        ),
        CommandSpec(
            Type.GET_TOPICS_OF_NAMESPACE_RESPONSE,
            "get_topics_of_namespace_response",
            pb.GetTopicsOfNamespaceResponse,
            _B,
        ),
        # producing
        CommandSpec(Type.PRODUCER, "producer", pb.Producer, _C),
        CommandSpec(Type.PRODUCER_SUCCESS, "producer_success", pb.ProducerSuccess, _B),
        CommandSpec(Type.SEND, "send", pb.Send, _C, carries_payload=True),
        CommandSpec(Type.SEND_RECEIPT, "send_receipt", pb.SendReceipt, _B),
        CommandSpec(Type.SEND_ERROR, "send_error", pb.SendError, _B),
        # CLOSE_PRODUCER/CLOSE_CONSUMER: the client closes its own, the broker may close
        # one when a topic moves or is deleted.
        CommandSpec(Type.CLOSE_PRODUCER, "close_producer", pb.CloseProducer, _E),
        # consuming
        CommandSpec(Type.SUBSCRIBE, "subscribe", pb.Subscribe, _C),
        CommandSpec(Type.FLOW, "flow", pb.Flow, _C),
        CommandSpec(Type.MESSAGE, "message", pb.Message, _B, carries_payload=True),
        CommandSpec(Type.ACK, "ack", pb.Ack, _C),
        CommandSpec(Type.ACK_RESPONSE, "ack_response", pb.AckResponse, _B),
        CommandSpec(
            Type.REDELIVER_UNACKNOWLEDGED_MESSAGES,
            "redeliver_unacknowledged_messages",
            pb.RedeliverUnacknowledgedMessages,
            _C,
        ),
        CommandSpec(Type.SEEK, "seek", pb.Seek, _C),
        CommandSpec(Type.UNSUBSCRIBE, "unsubscribe", pb.Unsubscribe, _C),
        CommandSpec(Type.CLOSE_CONSUMER, "close_consumer", pb.CloseConsumer, _E),
        CommandSpec(Type.GET_LAST_MESSAGE_ID, "get_last_message_id", pb.GetLastMessageId, _C),
        CommandSpec(
            Type.GET_LAST_MESSAGE_ID_RESPONSE,
            "get_last_message_id_response",
            pb.GetLastMessageIdResponse,
            _B,
        ),
        CommandSpec(
            Type.ACTIVE_CONSUMER_CHANGE, "active_consumer_change", pb.ActiveConsumerChange, _B
        ),
        CommandSpec(Type.REACHED_END_OF_TOPIC, "reached_end_of_topic", pb.ReachedEndOfTopic, _B),
        CommandSpec(Type.CONSUMER_STATS, "consumer_stats", pb.ConsumerStats, _C),
        CommandSpec(
            Type.CONSUMER_STATS_RESPONSE, "consumer_stats_response", pb.ConsumerStatsResponse, _B
        ),
        # schemas
        CommandSpec(Type.GET_SCHEMA, "get_schema", pb.GetSchema, _C),
        CommandSpec(Type.GET_SCHEMA_RESPONSE, "get_schema_response", pb.GetSchemaResponse, _B),
        CommandSpec(Type.GET_OR_CREATE_SCHEMA, "get_or_create_schema", pb.GetOrCreateSchema, _C),
        CommandSpec(
            Type.GET_OR_CREATE_SCHEMA_RESPONSE,
            "get_or_create_schema_response",
            pb.GetOrCreateSchemaResponse,
            _B,
        ),
        # transactions: only so that a broker can refuse the coordinator handshake
        CommandSpec(
            Type.TC_CLIENT_CONNECT_REQUEST,
            "tc_client_connect_request",
            pb.TcClientConnectRequest,
            _C,
        ),
        CommandSpec(
            Type.TC_CLIENT_CONNECT_RESPONSE,
            "tc_client_connect_response",
            pb.TcClientConnectResponse,
            _B,
        ),
    )
}


def _check_registry() -> None:
    envelope = pb.BaseCommand.DESCRIPTOR
    declared_bodies = {f.name for f in envelope.fields if f.name != "type"}
    invariant(len(REGISTRY) == len(declared_bodies), "registry and BaseCommand fields differ")
    for spec in REGISTRY.values():
        field = envelope.fields_by_name.get(spec.field)
        if field is None:
            raise InvariantViolation(f"BaseCommand has no field {spec.field}")
        invariant(field.number == spec.type, f"{spec.field}: field number != type number")
        invariant(spec.field == spec.name.lower(), f"{spec.field}: not named after its type")
        invariant(field.message_type is spec.body.DESCRIPTOR, f"{spec.field}: wrong body")
        expected_body = "".join(part.capitalize() for part in spec.name.split("_"))
        invariant(spec.body.DESCRIPTOR.name == expected_body, f"{spec.field}: body name")


_check_registry()


def spec_of(command: pb.BaseCommand) -> CommandSpec | None:
    """The registry entry for ``command``'s type, or None outside the subset."""
    return REGISTRY.get(command.type)


def body_of(command: pb.BaseCommand) -> ProtobufMessage:
    """The body message of ``command`` (``command.connect`` for a CONNECT, ...)."""
    body: ProtobufMessage = getattr(command, REGISTRY[command.type].field)
    return body


def build(command_type: pb.BaseCommand.Type, /, **fields: object) -> pb.BaseCommand:
    """A BaseCommand of ``command_type`` whose body is ``Body(**fields)``.

    >>> build(Type.FLOW, consumer_id=1, message_permits=1000).flow.message_permits
    1000
    """
    spec = REGISTRY[command_type]
    command = pb.BaseCommand(type=command_type)
    body = getattr(command, spec.field)
    body.SetInParent()
    if fields:
        body.MergeFrom(spec.body(**fields))
    return command


def request_id_of(command: pb.BaseCommand) -> int | None:
    """The request id a response to ``command`` must echo, if the command carries one."""
    spec = spec_of(command)
    if spec is None:
        return None
    body = getattr(command, spec.field)
    if "request_id" not in spec.body.DESCRIPTOR.fields_by_name or not body.HasField("request_id"):
        return None
    request_id: int = body.request_id
    return request_id


# --- builders for what the broker sends -------------------------------------------------


def connected(
    server_version: str,
    protocol_version: int,
    max_message_size: int,
    *,
    supports_broker_entry_metadata: bool = False,
) -> pb.BaseCommand:
    command = build(
        Type.CONNECTED,
        server_version=server_version,
        protocol_version=protocol_version,
        max_message_size=max_message_size,
    )
    if supports_broker_entry_metadata:
        command.connected.feature_flags.supports_broker_entry_metadata = True
    return command


def auth_challenge(
    server_version: str, protocol_version: int, method: str, data: bytes
) -> pb.BaseCommand:
    return build(
        Type.AUTH_CHALLENGE,
        server_version=server_version,
        protocol_version=protocol_version,
        challenge=pb.AuthData(auth_method_name=method, auth_data=data),
    )


def ping() -> pb.BaseCommand:
    return build(Type.PING)


def pong() -> pb.BaseCommand:
    return build(Type.PONG)


def success(request_id: int) -> pb.BaseCommand:
    return build(Type.SUCCESS, request_id=request_id)


def error(request_id: int, server_error: pb.ServerError, message: str) -> pb.BaseCommand:
    return build(Type.ERROR, request_id=request_id, error=server_error, message=message)


def lookup_response(
    request_id: int,
    broker_service_url: str | None,
    *,
    redirect: bool = False,
    authoritative: bool = True,
    broker_service_url_tls: str | None = None,
    proxy_through_service_url: bool = False,
) -> pb.BaseCommand:
    """CONNECT (this broker owns the topic) or REDIRECT (ask ``broker_service_url``).
    ``proxy_through_service_url``: the client keeps using the address it connected to.
    A URL that is None is left out (a broker with no plaintext port names none)."""
    outcome = pb.LookupResponse.REDIRECT if redirect else pb.LookupResponse.CONNECT
    command = build(
        Type.LOOKUP_RESPONSE,
        request_id=request_id,
        response=outcome,
        authoritative=authoritative,
        proxy_through_service_url=proxy_through_service_url,
    )
    if broker_service_url is not None:
        command.lookup_response.broker_service_url = broker_service_url
    if broker_service_url_tls is not None:
        command.lookup_response.broker_service_url_tls = broker_service_url_tls
    return command


def lookup_failed(request_id: int, server_error: pb.ServerError, message: str) -> pb.BaseCommand:
    return build(
        Type.LOOKUP_RESPONSE,
        request_id=request_id,
        response=pb.LookupResponse.FAILED,
        error=server_error,
        message=message,
    )


def partitioned_metadata_response(request_id: int, partitions: int) -> pb.BaseCommand:
    """``partitions`` is 0 for a topic that is not partitioned."""
    return build(
        Type.PARTITIONED_METADATA_RESPONSE,
        request_id=request_id,
        partitions=partitions,
        response=pb.PartitionedMetadataResponse.SUCCESS,
    )


def partitioned_metadata_failed(
    request_id: int, server_error: pb.ServerError, message: str
) -> pb.BaseCommand:
    return build(
        Type.PARTITIONED_METADATA_RESPONSE,
        request_id=request_id,
        response=pb.PartitionedMetadataResponse.FAILED,
        error=server_error,
        message=message,
    )


def get_topics_of_namespace_response(request_id: int, topics: Iterable[str]) -> pb.BaseCommand:
    return build(Type.GET_TOPICS_OF_NAMESPACE_RESPONSE, request_id=request_id, topics=list(topics))


def producer_success(
    request_id: int,
    producer_name: str,
    last_sequence_id: int = -1,
    *,
    schema_version: bytes | None = None,
    producer_ready: bool = True,
) -> pb.BaseCommand:
    command = build(
        Type.PRODUCER_SUCCESS,
        request_id=request_id,
        producer_name=producer_name,
        last_sequence_id=last_sequence_id,
        producer_ready=producer_ready,
    )
    if schema_version is not None:
        command.producer_success.schema_version = schema_version
    return command


def send_receipt(
    producer_id: int,
    sequence_id: int,
    message_id: pb.MessageIdData,
    highest_sequence_id: int = 0,
) -> pb.BaseCommand:
    return build(
        Type.SEND_RECEIPT,
        producer_id=producer_id,
        sequence_id=sequence_id,
        message_id=message_id,
        highest_sequence_id=highest_sequence_id,
    )


def send_error(
    producer_id: int, sequence_id: int, server_error: pb.ServerError, message: str
) -> pb.BaseCommand:
    return build(
        Type.SEND_ERROR,
        producer_id=producer_id,
        sequence_id=sequence_id,
        error=server_error,
        message=message,
    )


def message(
    consumer_id: int,
    message_id: pb.MessageIdData,
    redelivery_count: int = 0,
    ack_set: Iterable[int] = (),
) -> pb.BaseCommand:
    """The command of a MESSAGE frame; metadata and payload follow it (frames.py)."""
    return build(
        Type.MESSAGE,
        consumer_id=consumer_id,
        message_id=message_id,
        redelivery_count=redelivery_count,
        ack_set=list(ack_set),
    )


def ack_response(
    consumer_id: int,
    request_id: int,
    server_error: pb.ServerError | None = None,
    message: str | None = None,
) -> pb.BaseCommand:
    command = build(Type.ACK_RESPONSE, consumer_id=consumer_id, request_id=request_id)
    if server_error is not None:
        command.ack_response.error = server_error
        command.ack_response.message = message or ""
    return command


def close_producer(producer_id: int, request_id: int) -> pb.BaseCommand:
    return build(Type.CLOSE_PRODUCER, producer_id=producer_id, request_id=request_id)


def close_consumer(consumer_id: int, request_id: int) -> pb.BaseCommand:
    return build(Type.CLOSE_CONSUMER, consumer_id=consumer_id, request_id=request_id)


def get_last_message_id_response(
    request_id: int,
    last_message_id: pb.MessageIdData,
    mark_delete_position: pb.MessageIdData | None = None,
) -> pb.BaseCommand:
    command = build(
        Type.GET_LAST_MESSAGE_ID_RESPONSE, request_id=request_id, last_message_id=last_message_id
    )
    if mark_delete_position is not None:
        command.get_last_message_id_response.consumer_mark_delete_position.CopyFrom(
            mark_delete_position
        )
    return command


def active_consumer_change(consumer_id: int, is_active: bool) -> pb.BaseCommand:
    return build(Type.ACTIVE_CONSUMER_CHANGE, consumer_id=consumer_id, is_active=is_active)


def reached_end_of_topic(consumer_id: int) -> pb.BaseCommand:
    return build(Type.REACHED_END_OF_TOPIC, consumer_id=consumer_id)


def consumer_stats_response(request_id: int, **stats: object) -> pb.BaseCommand:
    """``stats`` are ConsumerStatsResponse fields (msg_rate_out=..., msg_backlog=...)."""
    return build(Type.CONSUMER_STATS_RESPONSE, request_id=request_id, **stats)


def get_schema_response(
    request_id: int, schema: pb.Schema, schema_version: bytes
) -> pb.BaseCommand:
    return build(
        Type.GET_SCHEMA_RESPONSE,
        request_id=request_id,
        schema=schema,
        schema_version=schema_version,
    )


def get_or_create_schema_response(request_id: int, schema_version: bytes) -> pb.BaseCommand:
    return build(
        Type.GET_OR_CREATE_SCHEMA_RESPONSE, request_id=request_id, schema_version=schema_version
    )


def tc_client_connect_response(
    request_id: int, server_error: pb.ServerError | None = None, message: str | None = None
) -> pb.BaseCommand:
    command = build(Type.TC_CLIENT_CONNECT_RESPONSE, request_id=request_id)
    if server_error is not None:
        command.tc_client_connect_response.error = server_error
        command.tc_client_connect_response.message = message or ""
    return command


# --- error replies ------------------------------------------------------------------------

_ErrorReply = Callable[[pb.BaseCommand, pb.ServerError, str], pb.BaseCommand | None]


def _reply_send(command: pb.BaseCommand, server_error: pb.ServerError, text: str) -> pb.BaseCommand:
    return send_error(command.send.producer_id, command.send.sequence_id, server_error, text)


def _reply_lookup(
    command: pb.BaseCommand, server_error: pb.ServerError, text: str
) -> pb.BaseCommand:
    return lookup_failed(command.lookup.request_id, server_error, text)


def _reply_partitioned(
    command: pb.BaseCommand, server_error: pb.ServerError, text: str
) -> pb.BaseCommand:
    return partitioned_metadata_failed(command.partitioned_metadata.request_id, server_error, text)


def _reply_ack(
    command: pb.BaseCommand, server_error: pb.ServerError, text: str
) -> pb.BaseCommand | None:
    if not command.ack.HasField("request_id"):
        return None  # the client asked for no receipt
    return ack_response(command.ack.consumer_id, command.ack.request_id, server_error, text)


def _reply_with_error_code(response_type: pb.BaseCommand.Type) -> _ErrorReply:
    def reply(command: pb.BaseCommand, server_error: pb.ServerError, text: str) -> pb.BaseCommand:
        request_id = request_id_of(command) or 0  # every such request carries one
        return build(
            response_type, request_id=request_id, error_code=server_error, error_message=text
        )

    return reply


def _reply_tc_connect(
    command: pb.BaseCommand, server_error: pb.ServerError, text: str
) -> pb.BaseCommand:
    return tc_client_connect_response(
        command.tc_client_connect_request.request_id, server_error, text
    )


#: Requests whose failure is reported by their own response type rather than ERROR.
_ERROR_REPLIES: dict[pb.BaseCommand.Type, _ErrorReply] = {
    Type.SEND: _reply_send,
    Type.LOOKUP: _reply_lookup,
    Type.PARTITIONED_METADATA: _reply_partitioned,
    Type.ACK: _reply_ack,
    Type.GET_SCHEMA: _reply_with_error_code(Type.GET_SCHEMA_RESPONSE),
    Type.GET_OR_CREATE_SCHEMA: _reply_with_error_code(Type.GET_OR_CREATE_SCHEMA_RESPONSE),
    Type.CONSUMER_STATS: _reply_with_error_code(Type.CONSUMER_STATS_RESPONSE),
    Type.TC_CLIENT_CONNECT_REQUEST: _reply_tc_connect,
}


def error_reply(
    command: pb.BaseCommand, server_error: pb.ServerError, text: str
) -> pb.BaseCommand | None:
    """The failure answer a client expects to ``command``, or None if it expects none.

    SEND gets SEND_ERROR, LOOKUP a FAILED lookup response, schema and stats requests their
    response with ``error_code`` set, any other request with a request id gets ERROR.
    Commands without a request id (FLOW, ACK without receipt, PING, ...) get nothing.
    """
    reply = _ERROR_REPLIES.get(command.type)
    if reply is not None:
        return reply(command, server_error, text)
    request_id = request_id_of(command)
    if request_id is None:
        return None
    return error(request_id, server_error, text)
