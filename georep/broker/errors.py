"""Operating errors of the embedded broker.

Each error names the Pulsar ``ServerError`` a client is answered with, so a handler can
refuse a request in one line (``commands.error_reply(command, error.server_error,
str(error))``) and the client reacts as it would to a Pulsar broker: ``ConsumerBusy``
fails the subscribe at once, ``ServiceNotReady`` makes the client retry, and so on.
Broken invariants are not here: they raise ``InvariantViolation`` and stop the process.
"""

from __future__ import annotations

from typing import ClassVar

from georep.domain.topic_name import InvalidTopicName
from georep.wire import pulsar_wire_pb2 as pb


class BrokerError(Exception):
    """Base of every broker operating error."""

    server_error: ClassVar[pb.ServerError] = pb.UNKNOWN_ERROR


def server_error_of(error: BrokerError | InvalidTopicName) -> pb.ServerError:
    """The ``ServerError`` a client is answered with for ``error``.

    A topic, tenant or namespace name the broker cannot accept (``georep/domain/topic_name.py``
    refuses it) is answered TOPIC_NOT_FOUND (with the reason in the message), not
    INVALID_TOPIC_NAME: the C++ client retries InvalidTopicName until its operation
    timeout, while no topic of such a name can ever be found, so the client should fail at
    once."""
    if isinstance(error, InvalidTopicName):
        return pb.TOPIC_NOT_FOUND
    return error.server_error


class TopicNotFound(BrokerError):
    """The topic, or the namespace it would live in, does not exist."""

    server_error = pb.TOPIC_NOT_FOUND


class NamespaceNotFound(TopicNotFound):
    """The tenant or namespace does not exist."""


class TopicExists(BrokerError):
    """A topic of that name already exists (creating a partitioned topic over it)."""

    server_error = pb.NOT_ALLOWED_ERROR


class SubscriptionNotFound(BrokerError):
    server_error = pb.SUBSCRIPTION_NOT_FOUND


class ConsumerBusy(BrokerError):
    """An exclusive subscription already has a consumer, or the subscription is of
    another type and still has consumers."""

    server_error = pb.CONSUMER_BUSY


class ConsumerAssignError(BrokerError):
    """Key_Shared could not give the consumer a hash range."""

    server_error = pb.CONSUMER_ASSIGN_ERROR


class ProducerBusy(BrokerError):
    """A producer of that name is already connected, or the topic has an exclusive one."""

    server_error = pb.PRODUCER_BUSY


class NotAllowed(BrokerError):
    """A request the broker understands but refuses (a reserved name, cumulative ack on a
    Shared subscription, unsubscribing while others are connected, ...)."""

    server_error = pb.NOT_ALLOWED_ERROR


class MessageNeverStored(NotAllowed):
    """A SEND storage can never take: its entry is larger than any message may be with
    its metadata, or it is one chunk of a chunked message (not supported). Permanent for
    that message; the producer and the topic go on (see ``producer.py``)."""


class ProducerSendRefused(BrokerError):
    """Answers, once, the re-creation of a producer whose message storage refused (one it
    can never take, or any while no ensemble can write): the official client fails its
    pending sends with this error, which it treats as final for them, and creates the
    producer again (then accepted)."""

    server_error = pb.PRODUCER_BLOCKED_QUOTA_EXCEEDED_EXCEPTION


class ServiceNotReady(BrokerError):
    """Try again soon: the topic is loading, fenced after a storage failure, or closing."""

    server_error = pb.SERVICE_NOT_READY


class PersistenceError(BrokerError):
    """Storage refused or failed a write."""

    server_error = pb.PERSISTENCE_ERROR


class TooManyRequests(BrokerError):
    """A per-connection limit (producers, consumers) was reached."""

    server_error = pb.TOO_MANY_REQUESTS
