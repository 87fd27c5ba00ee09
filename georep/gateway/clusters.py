"""The gateway's links to its clusters, and the pacing of what opens on each.

One binary-protocol link and one admin REST client per cluster (the local one and each
``[remotes]`` entry), over TLS where its URLs say so, shared by every replicator and
sync of the gateway. Opens are paced per cluster (docs/ARCHITECTURE.md "Scale"): the
replicators' and syncs' consumers and producers on the local cluster wait for
``opening``, the replicators' producers on a remote for that remote's
``remote_openings`` entry, each ``limits.gateway_opening_count_max`` at a time; so a
gateway started beside 10,000 topics opens them at a pace each cluster answers, and the
remote's producers open while the local subscribes still do.

What the links met is read here too: the requests sent, what could not be reached, what
refused the gateway's role (``/health``, ``/metrics``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

from georep import limits
from georep.client.admin import ClusterAdminClient
from georep.client.link import PulsarLink
from georep.client.refusals import Refusal
from georep.gateway.cluster_endpoint import ClusterEndpoint


class ClusterLinks:
    def __init__(self, local: ClusterEndpoint, remotes: Mapping[str, ClusterEndpoint]) -> None:
        self.local_name = local.name
        self.local_link = _link(local)
        self.local_admin = _admin(local)
        self.remote_links = {name: _link(endpoint) for name, endpoint in remotes.items()}
        self.remote_admins = {name: _admin(endpoint) for name, endpoint in remotes.items()}
        #: Replicators and syncs opening consumers and producers on the local cluster, at
        #: most this many at once; ``remote_openings``: replicators' producers, per remote.
        self.opening = asyncio.Semaphore(limits.gateway_opening_count_max)
        self.remote_openings = {
            name: asyncio.Semaphore(limits.gateway_opening_count_max) for name in remotes
        }

    async def close(self) -> None:
        links = [self.local_link, *self.remote_links.values()]
        admins = [self.local_admin, *self.remote_admins.values()]
        for closing in [*(link.close() for link in links), *(a.close() for a in admins)]:
            with contextlib.suppress(Exception):
                await closing

    def _links(self) -> dict[str, PulsarLink]:
        return {self.local_name: self.local_link, **self.remote_links}

    def _admins(self) -> dict[str, ClusterAdminClient]:
        return {self.local_name: self.local_admin, **self.remote_admins}

    def admin_requests(self) -> dict[str, int]:
        """Admin REST requests this gateway sent, per cluster, since it started."""
        return {name: admin.requests_sent for name, admin in self._admins().items()}

    def admin_requests_by_kind(self) -> dict[str, dict[str, int]]:
        """The same, per cluster and kind of request (``client/admin.request_kind``)."""
        return {name: dict(admin.requests_by_kind) for name, admin in self._admins().items()}

    def unreachable(self) -> dict[str, list[str]]:
        """Per cluster, why its brokers or admin REST could not be reached last time (a
        refused connection, a TLS handshake that failed); empty where both answer."""
        links, admins = self._links(), self._admins()
        return {
            name: [
                f"{where}: {reason}"
                for where, reason in (
                    ("brokers", links[name].connect_error),
                    ("admin REST", admins[name].connect_error),
                )
                if reason is not None
            ]
            for name in links
        }

    def refused(self) -> dict[str, dict[str, Refusal]]:
        """Per cluster, what its brokers or admin REST refused the gateway's role (a
        right not granted, a token refused), by operation, until it succeeds again."""
        links, admins = self._links(), self._admins()
        return {
            name: {**links[name].refusals.current(), **admins[name].refusals.current()}
            for name in links
        }


def _link(endpoint: ClusterEndpoint) -> PulsarLink:
    """The binary-protocol link to a cluster, over TLS where its URL says so."""
    return PulsarLink(
        endpoint.service_url,
        token=endpoint.token_text,
        ssl_context=endpoint.ssl_context,
        cluster=endpoint.name,
        listener_name=endpoint.listener_name,
        keepalive_s=endpoint.keepalive_interval_s,
    )


def _admin(endpoint: ClusterEndpoint) -> ClusterAdminClient:
    """The admin REST client of a cluster, over https where its URL says so."""
    return ClusterAdminClient(
        endpoint.admin_url,
        cluster_name=endpoint.name,
        token=endpoint.token_text,
        ssl_context=endpoint.ssl_context,
    )
