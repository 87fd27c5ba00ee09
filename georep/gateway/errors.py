"""Operating errors of the gateway's admin plane: a replication policy request that is
invalid (a 4xx for the caller). Links to clusters fail with ``client/errors.py``'s
errors, replication with ``replicator/errors.py``'s, configuration with
``console.ConfigError`` (exit code 2)."""

from __future__ import annotations

from georep.rest.errors import RestError


class GatewayError(Exception):
    """Base of the gateway's own operating errors."""


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
