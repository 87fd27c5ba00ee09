"""The requests a connection answers with one reply and no change to its own state: where
a topic lives (LOOKUP), how many partitions it has (PARTITIONED_METADATA), the topics of a
namespace (GET_TOPICS_OF_NAMESPACE), its schemas (GET_SCHEMA, and GET_OR_CREATE_SCHEMA,
which may register one in ``schema_registry.py``), and an open consumer's last message id
and figures (GET_LAST_MESSAGE_ID, CONSUMER_STATS).

A function here takes what the request reads (the service, or the consumer the
connection found for it) and returns the reply command, which the connection
(``connection.py``) sends. An operating error (a namespace that does not exist, no such
schema) is raised as a ``BrokerError``; the connection turns it into the error reply the
request expects, as for every handler.

Lookup, worked: a cluster has one broker, so it owns every topic, and the client is
connected to it already, at an address that works from where the client is (a published
container port, say), which our own listening address may not be (0.0.0.0). The reply
names the service URL and asks the client to go through it
(``proxy_through_service_url``); a TLS broker serves TLS only (``server.py``), so it
names its URL as Pulsar names a TLS port, in ``broker_service_url_tls``, and no plaintext
URL: a client over TLS reads that field alone (the official one and ours).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from georep.broker import schema_registry
from georep.broker.errors import BrokerError
from georep.broker.message_id import message_id
from georep.domain.topic_name import TopicName
from georep.wire import commands
from georep.wire import pulsar_wire_pb2 as pb

if TYPE_CHECKING:
    from georep.broker.consumer import Consumer
    from georep.broker.service import BrokerService
    from georep.broker.subscription import Subscription
    from georep.broker.topic import PersistentTopic


class NoSchema(BrokerError):
    """The topic has no schema, or none of the version asked for."""

    server_error = pb.TOPIC_NOT_FOUND


async def lookup(service: BrokerService, request: pb.Lookup) -> pb.BaseCommand:
    """This broker's service URL for any topic of an existing namespace."""
    await service.partitions_of(TopicName.parse(request.topic))  # the namespace must exist
    url = service.config.service_url
    tls = url.startswith("pulsar+ssl://")
    return commands.lookup_response(
        request.request_id,
        None if tls else url,
        broker_service_url_tls=url if tls else None,
        proxy_through_service_url=True,
    )


async def partitioned_metadata(
    service: BrokerService, request: pb.PartitionedMetadata
) -> pb.BaseCommand:
    partitions = await service.partitions_of(TopicName.parse(request.topic))
    return commands.partitioned_metadata_response(request.request_id, partitions)


async def topics_of_namespace(
    service: BrokerService, request: pb.GetTopicsOfNamespace
) -> pb.BaseCommand:
    topics = await service.topics_of_namespace(request.namespace)
    return commands.get_topics_of_namespace_response(request.request_id, topics)


async def get_schema(service: BrokerService, request: pb.GetSchema) -> pb.BaseCommand:
    """The topic's schema: its latest, or the version ``schema_version`` names."""
    name = TopicName.parse(request.topic)
    version = None
    if request.HasField("schema_version"):
        version = schema_registry.decode_version(request.schema_version)
        if version is None:
            raise NoSchema(f"{name}: {request.schema_version.hex()} is no schema version")
    record = await service.schemas.get(name, version)
    if record is None:
        raise NoSchema(f"{name} has no schema" + ("" if version is None else f" {version}"))
    return commands.get_schema_response(
        request.request_id,
        schema_registry.wire_schema(name, record),
        schema_registry.encode_version(record.version),
    )


async def get_or_create_schema(
    service: BrokerService, request: pb.GetOrCreateSchema
) -> pb.BaseCommand:
    """The version of the request's schema on the topic, registered if new."""
    record = await service.schemas.register(
        TopicName.parse(request.topic), *schema_registry.record_of(request.schema)
    )
    return commands.get_or_create_schema_response(
        request.request_id, schema_registry.encode_version(record.version)
    )


async def last_message_id(
    request: pb.GetLastMessageId,
    topic: PersistentTopic,
    subscription: Subscription,
    consumer: Consumer,
) -> pb.BaseCommand:
    """The topic's last message id and the subscription's mark-delete position."""
    position, batch_index = await topic.last_message_id()
    partition = consumer.partition_index
    return commands.get_last_message_id_response(
        request.request_id,
        message_id(position, partition, batch_index),
        message_id(subscription.cursor.mark_delete_position, partition),
    )


def consumer_stats(
    request: pb.ConsumerStats, subscription: Subscription, consumer: Consumer
) -> pb.BaseCommand:
    return commands.consumer_stats_response(
        request.request_id,
        consumer_name=consumer.name,
        available_permits=max(0, consumer.permits),
        unacked_messages=consumer.unacked_messages,
        msg_backlog=int(subscription.cursor.backlog),
        subscription_type=pb.Subscribe.SubType.Name(consumer.sub_type),
    )
