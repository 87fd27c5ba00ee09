"""Operating errors of the client: a link to a cluster (binary protocol or admin REST) is
unreachable, slow, or refused a request. ``retriable`` says whether trying again later
may help; a replicator retries those with backoff and records the rest as its last
error. A broken invariant is a bug and stops the process (``georep.invariant``)."""

from __future__ import annotations

from georep.wire import pulsar_wire_pb2 as pb

#: Server errors after which the same request may succeed later.
_RETRIABLE_SERVER_ERRORS = frozenset(
    {
        pb.UNKNOWN_ERROR,
        pb.METADATA_ERROR,
        pb.PERSISTENCE_ERROR,
        pb.SERVICE_NOT_READY,
        pb.CONSUMER_BUSY,
        pb.PRODUCER_BUSY,
        pb.TOO_MANY_REQUESTS,
        pb.PRODUCER_BLOCKED_QUOTA_EXCEEDED_ERROR,
        pb.PRODUCER_BLOCKED_QUOTA_EXCEEDED_EXCEPTION,
        pb.TOPIC_TERMINATED_ERROR,
        pb.TOPIC_NOT_FOUND,
    }
)
#: Server errors that refuse the gateway's role (client/refusals.py): a right or a token
#: an operator must fix, which the next attempt in a second would meet again.
_REFUSING_SERVER_ERRORS = frozenset({pb.AUTHENTICATION_ERROR, pb.AUTHORIZATION_ERROR})
#: Admin REST statuses that refuse the gateway's role: Pulsar answers 401 for a topic
#: operation the role has no right to (and for a bad token), 403 for a namespace's.
REFUSING_STATUSES = frozenset({401, 403})


class LinkError(Exception):
    """A link to a cluster (binary protocol or admin REST) failed."""

    @property
    def retriable(self) -> bool:
        """Whether trying again later may succeed: yes, unless a kind says otherwise."""
        return True


class ConnectFailed(LinkError):
    """A connection could not be opened: refused, unreachable, or a TLS handshake that
    failed (an unknown CA, an expired certificate, a name mismatch, a refused client
    certificate: ``tls_failed``), which the next attempt in a second would meet again.

    The link that opened it says so once per cluster and cause (``PulsarLink``), so the
    many producers and consumers that meet the same failure record it without logging it
    again."""

    def __init__(self, message: str, *, tls_failed: bool = False) -> None:
        super().__init__(message)
        self.tls_failed = tls_failed

    @property
    def retriable(self) -> bool:
        return not self.tls_failed


class LinkClosed(LinkError):
    """The connection, producer or consumer is closed (by us, the peer, or a fault)."""


class RequestTimeout(LinkError):
    """A request got no answer within its deadline."""


class ServerError(LinkError):
    """The broker answered a request with an error."""

    def __init__(self, message: str, code: int = pb.UNKNOWN_ERROR) -> None:
        super().__init__(message)
        self.code = code

    @property
    def retriable(self) -> bool:
        return self.code in _RETRIABLE_SERVER_ERRORS

    @property
    def refused(self) -> bool:
        """The broker refused the role (authentication or authorization)."""
        return self.code in _REFUSING_SERVER_ERRORS

    @property
    def code_name(self) -> str:
        try:
            return pb.ServerError.Name(self.code)
        except ValueError:
            return str(self.code)


class AdminRequestFailed(LinkError):
    """A cluster's admin REST answered with an error status (or not at all: status 0).
    ``unreachable``: no connection could be opened (refused, or a TLS handshake that
    failed: ``tls_failed``), which the admin client says once per cluster and cause."""

    def __init__(
        self, message: str, status: int = 0, *, unreachable: bool = False, tls_failed: bool = False
    ) -> None:
        super().__init__(message)
        self.status = status
        self.unreachable = unreachable or tls_failed
        self.tls_failed = tls_failed

    @property
    def retriable(self) -> bool:
        if self.tls_failed:
            return False
        return self.status == 0 or self.status >= 500 or self.status == 429

    @property
    def refused(self) -> bool:
        """The admin REST refused the role (401, 403)."""
        return self.status in REFUSING_STATUSES


def said_once_per_cluster(error: BaseException) -> bool:
    """Whether ``error`` is a cluster that cannot be reached or that refused the role,
    which its link or admin client logs once per cluster and cause (or operation,
    ``client/refusals.py``): the many replicators and syncs that meet it record it
    without a line each (at 10,000 topics, 10,000 lines for one cause)."""
    if isinstance(error, ServerError):
        return error.refused
    return isinstance(error, ConnectFailed) or (
        isinstance(error, AdminRequestFailed) and (error.unreachable or error.refused)
    )


class MessageTooLarge(LinkError):
    """An entry does not fit the remote broker's largest message."""

    retriable = False


def moved(error: BaseException) -> bool:
    """Whether ``error`` is a topic moving between brokers, or its broker going away: a
    producer or consumer closed by the broker (an unload, a bundle split, a broker
    stopping) or with its connection, or a broker not ready for the topic yet. The owner
    looks the topic up again. Routine in a cluster of several brokers, and met by every
    topic at once in a rolling restart, so it is no WARNING per topic; a connection that
    then cannot be opened is said once per cluster (:func:`said_once_per_cluster`)."""
    if isinstance(error, LinkClosed):
        return True
    return isinstance(error, ServerError) and error.code == pb.SERVICE_NOT_READY
