"""What a cluster refused the gateway's role: an operating error an operator must fix (a
right to grant, a token to renew), which retrying soon cannot.

A refusal is an admin REST answer 401 or 403, or a broker's ``AuthorizationError`` or
``AuthenticationError``. Beside Pulsar with authorization on, a role without the right
for a topic operation gets 401 ("Unauthorized to validateTopicOperation for operation
[GET_STATS] ..."), and without a namespace or tenant right 403; a token that is
missing, expired or signed with another key gets 401 too. Each is kept per operation
(``GET /admin/v2/persistent/{topic}/internalStats``, ``consume``, ``produce``): one
WARNING per cluster and operation (with the namespace it names: rights are granted per
namespace) however many topics meet it, a count, and the reason
until the same operation succeeds again. The gateway's ``/health`` and metrics read it
(``gateway/manager.py``); ``docs/PULSAR.md`` "Least privilege" lists the rights.

Example: a role whose ``consume`` on ``orders/eu`` was revoked::

    refusals.refused("consume on orders/eu", "AUTHORIZATION_ERROR: ...")
    refusals.current()  # {"consume on orders/eu": Refusal("AUTHORIZATION_ERROR: ...", 1)}
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)

#: Where an operator reads which rights the gateway's role needs.
RIGHTS_DOCUMENT = 'docs/PULSAR.md, "Least privilege"'


@dataclass
class Refusal:
    """The last reason an operation was refused, and how often since it last worked."""

    reason: str
    count: int = 1


class Refusals:
    """A cluster's refusals of the gateway's role, by operation."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self._by_operation: dict[str, Refusal] = {}
        #: Refusals since the process started, whatever happened since.
        self.total = 0

    def refused(self, operation: str, reason: str) -> None:
        """``operation`` was refused; the first time (or for another reason), a WARNING."""
        self.total += 1
        known = self._by_operation.get(operation)
        if known is not None and known.reason == reason:
            known.count += 1
            return
        self._by_operation[operation] = Refusal(reason, 1 if known is None else known.count + 1)
        log.warning(
            "cluster %s refused the gateway's role: %s: %s (rights: %s)",
            self.cluster, operation, reason, RIGHTS_DOCUMENT,
        )  # fmt: skip

    def allowed(self, operation: str) -> None:
        """``operation`` succeeded: a refusal of it, if any, is over."""
        if self._by_operation.pop(operation, None) is not None:
            log.info("cluster %s allows the gateway's role %s again", self.cluster, operation)

    def current(self) -> dict[str, Refusal]:
        """Operation -> its refusal, for those refused since they last succeeded."""
        return dict(self._by_operation)
