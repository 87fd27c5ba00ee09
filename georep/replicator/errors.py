"""Operating errors of the gateway: links to clusters, replication, policies, config.

A broken invariant is a bug and stops the process (``georep.invariant``); everything here
is an operating error that a caller handles:

- :class:`LinkError` and its subclasses: a cluster is unreachable, slow, or refused a
  request. ``retriable`` says whether trying again later may help; a replicator retries
  those with backoff and records the rest as its last error.
- :class:`PolicyError`: bad input to the policy store or REST (a 4xx for the caller).
- :class:`ConfigError`: the gateway's configuration is unusable (exit code 2).
"""

from __future__ import annotations

from georep.broker.protocol import pulsar_wire_pb2 as pb
from georep.rest.errors import RestError

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


class GatewayError(Exception):
    """Base of the gateway's operating errors."""


class LinkError(GatewayError):
    """A link to a cluster (binary protocol or admin REST) failed."""

    retriable = True


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
    def retriable(self) -> bool:  # type: ignore[override]
        return self.code in _RETRIABLE_SERVER_ERRORS

    @property
    def code_name(self) -> str:
        try:
            return pb.ServerError.Name(self.code)
        except ValueError:
            return str(self.code)


class AdminRequestFailed(LinkError):
    """A cluster's admin REST answered with an error status (or not at all: status 0)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status

    @property
    def retriable(self) -> bool:  # type: ignore[override]
        return self.status == 0 or self.status >= 500 or self.status == 429


class MessageTooLarge(LinkError):
    """An entry does not fit the remote broker's largest message."""

    retriable = False


class ReplicationStalled(GatewayError):
    """An entry cannot be replicated as it is (its id does not fit a sequence id, it is
    larger than the remote accepts): the replicator stops there and reports it."""


class PolicyError(GatewayError, RestError):
    """A replication policy request is invalid (HTTP 400)."""

    status = 400


class UnknownCluster(PolicyError):
    """A policy names a cluster this gateway has no remote for (HTTP 400)."""


class PolicyNotFound(PolicyError):
    """No policy at that scope and name (HTTP 404)."""

    status = 404


class PolicyConflict(PolicyError):
    """The policy changed since the version the caller gave (HTTP 409)."""

    status = 409


class ConfigError(GatewayError, ValueError):
    """The gateway configuration is missing something or invalid; the message says what
    (never a token)."""


def check_keys(table, allowed: set[str], where: str) -> None:
    """ConfigError naming every key of ``table`` that is not in ``allowed``: a typo in a
    key must not silently mean its default."""
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {sorted(allowed)}")
