"""The gateway's client of a cluster's admin REST (Pulsar admin v2 paths).

What the gateway needs of a cluster beyond the binary protocol:

- the topics of a namespace (discovery of new topics and partitions),
- a topic's partition count,
- on a remote: that the tenant, the namespace and the partitioned topic exist before a
  replicator produces to a partition (as Pulsar's global configuration would make them
  exist everywhere): :meth:`ensure_topic` creates what is missing,
- deleting a replication subscription that is no longer wanted.

Every request has a deadline; a failure raises :class:`AdminRequestFailed` with the HTTP
status (0: no answer), which says whether retrying may help. The token is sent as a
bearer token and never logged.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import quote

import aiohttp

from georep import limits
from georep.broker.topic_name import TopicName
from georep.replicator.errors import AdminRequestFailed

log = logging.getLogger(__name__)

V2 = "/admin/v2"


def _path(topic: TopicName) -> str:
    return (
        f"{V2}/persistent/{quote(topic.tenant)}/{quote(topic.namespace_local)}"
        f"/{quote(topic.local_name)}"
    )


class ClusterAdminClient:
    def __init__(
        self,
        admin_url: str,
        *,
        cluster_name: str,
        token: str | None = None,
        timeout_s: float = limits.cluster_admin_request_timeout_s_default,
    ) -> None:
        self.admin_url = admin_url.rstrip("/")
        self.cluster_name = cluster_name
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None
        #: Topics (base names) known to exist with their partitions on this cluster.
        self._ensured: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"ClusterAdminClient({self.cluster_name} at {self.admin_url})"

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _request(
        self, method: str, path: str, *, body: Any = None, allowed: tuple[int, ...] = ()
    ) -> tuple[int, Any]:
        """(status, parsed JSON or None). Statuses in ``allowed`` and 2xx are answers;
        anything else raises."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout, headers=self._headers)
        url = f"{self.admin_url}{path}"
        try:
            async with self._session.request(method, url, json=body) as response:
                text = await response.text()
                status = response.status
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise AdminRequestFailed(f"{self.cluster_name}: {method} {path}: {error!r}") from None
        if 200 <= status < 300 or status in allowed:
            try:
                return status, (json.loads(text) if text else None)
            except ValueError:
                return status, None
        raise AdminRequestFailed(
            f"{self.cluster_name}: {method} {path} answered {status}: {text[:300]}", status
        )

    # -- reads --

    async def cluster_names(self) -> list[str]:
        _, names = await self._request("GET", f"{V2}/clusters")
        return list(names or [])

    async def list_topics(self, namespace: str) -> list[str] | None:
        """The namespace's topics (partitions listed one by one); None if it does not
        exist here."""
        tenant, _, name = namespace.partition("/")
        status, topics = await self._request(
            "GET", f"{V2}/persistent/{quote(tenant)}/{quote(name)}", allowed=(404,)
        )
        if status == 404:
            return None
        return [str(t) for t in (topics or [])][: limits.gateway_namespace_topics_max]

    async def partitions(self, topic: TopicName) -> int | None:
        """Partition count (0: a non-partitioned topic); None if the topic is unknown."""
        status, document = await self._request("GET", f"{_path(topic)}/partitions", allowed=(404,))
        if status == 404:
            return None
        return int((document or {}).get("partitions", 0))

    async def subscriptions(self, topic: TopicName) -> list[str]:
        status, stats = await self._request("GET", f"{_path(topic)}/stats", allowed=(404,))
        if status == 404:
            return []
        return sorted((stats or {}).get("subscriptions", {}))

    # -- changes --

    async def ensure_topic(self, topic: TopicName, partitions: int) -> None:
        """Make sure ``topic``'s tenant and namespace exist here and, when ``partitions``
        is above 0, that ``topic`` (a base name) is partitioned that many ways."""
        key = str(topic)
        if self._ensured.get(key) == partitions:
            return
        status, _ = await self._request(
            "GET", f"{V2}/namespaces/{quote(topic.tenant)}/{quote(topic.namespace_local)}",
            allowed=(404,),
        )  # fmt: skip
        if status == 404:
            await self._request(
                "PUT",
                f"{V2}/tenants/{quote(topic.tenant)}",
                body={"adminRoles": [], "allowedClusters": [self.cluster_name]},
                allowed=(409,),
            )
            await self._request(
                "PUT",
                f"{V2}/namespaces/{quote(topic.tenant)}/{quote(topic.namespace_local)}",
                allowed=(409,),
            )
            log.info("%s: created namespace %s", self.cluster_name, topic.namespace)
        if partitions > 0:
            existing = await self.partitions(topic)
            if not existing:
                await self._request(
                    "PUT", f"{_path(topic)}/partitions", body=partitions, allowed=(409,)
                )
                log.info("%s: created %s with %d partitions", self.cluster_name, topic, partitions)
            elif existing != partitions:
                log.warning(
                    "%s: %s has %d partitions here, %d at the origin; partitions beyond %d"
                    " are not replicated",
                    self.cluster_name, topic, existing, partitions, existing,
                )  # fmt: skip
        self._ensured[key] = partitions

    async def delete_subscription(self, topic: TopicName, subscription: str) -> bool:
        """False if there was no such subscription (or topic)."""
        status, _ = await self._request(
            "DELETE", f"{_path(topic)}/subscription/{quote(subscription)}", allowed=(404,)
        )
        return status != 404
