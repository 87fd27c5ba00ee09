"""The gateway's client of a cluster's admin REST (Pulsar admin v2 paths).

What the gateway needs of a cluster beyond the binary protocol:

- the topics of a namespace (discovery of new topics and partitions),
- a topic's partition count,
- on a remote: that the tenant, the namespace and the partitioned topic exist before a
  replicator produces to a partition (as Pulsar's global configuration would make them
  exist everywhere): :meth:`ensure_topic` creates what is missing,
- deleting a replication subscription that is no longer wanted,
- subscription sync (georep's own paths, ``/admin/georep/v1``): every subscription's
  acknowledgement state (:meth:`ClusterAdminClient.sync_state`) and bringing one
  subscription to a synced state (:meth:`ClusterAdminClient.sync_subscription`), split
  into as many requests as the cluster's per-request limits need.

Every request has a deadline; a failure raises :class:`AdminRequestFailed` with the HTTP
status (0: no answer), which says whether retrying may help. The token is sent as a
bearer token and never logged. An ``https://`` admin URL runs every request over TLS with
the cluster's ``ssl.SSLContext`` (``client/tls.py``); a failed handshake is an
AdminRequestFailed naming the TLS reason, never a retry in plaintext.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import ssl
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp

from georep import limits
from georep.client import tls
from georep.client.errors import REFUSING_STATUSES, AdminRequestFailed
from georep.client.refusals import Refusals
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.wire import pulsar_wire_pb2 as pb

log = logging.getLogger(__name__)

V2 = "/admin/v2"
GEOREP_V1 = "/admin/georep/v1"


def _segment(name: str) -> str:
    """One path segment holding ``name``: every character that could change the path's
    shape (``/``, ``?``, ``#``, ``%``) encoded. Names are never ``.`` or ``..``
    (``georep/domain/names.py``), which no encoding could keep from being collapsed."""
    return quote(name, safe="")


def _path(topic: TopicName, prefix: str = V2) -> str:
    return (
        f"{prefix}/persistent/{_segment(topic.tenant)}/{_segment(topic.namespace_local)}"
        f"/{_segment(topic.local_name)}"
    )


@dataclass(frozen=True)
class SubscriptionState:
    """One subscription's acknowledgement state, as ``sync_state`` reads it.

    ``ranges`` are closed ranges of acknowledged entries above ``mark_delete``, sorted;
    ``batches`` maps a partially acknowledged batch entry to (its size, the indexes of
    its acknowledged members). ``sub_type`` is ``Exclusive``, ``Shared``, ``Failover``,
    ``Key_Shared``, or None when no consumer has attached since the topic was loaded.
    ``*_truncated``: the cluster left out its highest ranges / batches (past
    ``limits.sync_state_*_count_max``), which count as unacknowledged here.
    """

    mark_delete: Position
    ranges: tuple[tuple[Position, Position], ...]
    batches: Mapping[Position, tuple[int, frozenset[int]]]
    consumers: int
    replicated: bool
    sub_type: str | None
    ranges_truncated: bool = False
    #: Consumers attached since the topic was loaded (0 when the cluster does not say).
    consumers_attached: int = 0
    batches_truncated: bool = False


def request_kind(method: str, path: str) -> str:
    """A request's path with its names left out, to count requests by what they ask.

    >>> request_kind("GET", "/admin/v2/persistent/t/ns/orders-partition-1/internalStats")
    'GET /admin/v2/persistent/{topic}/internalStats'
    >>> request_kind("GET", "/admin/v2/namespaces/t/ns/topics")
    'GET /admin/v2/namespaces/{namespace}/topics'
    >>> request_kind("GET", "/admin/v2/persistent/t/ns")
    'GET /admin/v2/persistent/{namespace}'
    >>> request_kind("GET", "/admin/georep/v1/namespaces/t/ns/sync-changes")
    'GET /admin/georep/v1/namespaces/{namespace}/sync-changes'
    """
    parts = path.split("?", 1)[0].split("/")
    for index, part in enumerate(parts):
        if part in ("persistent", "non-persistent") and len(parts) >= index + 4:
            parts[index + 1 : index + 4] = ["{topic}"]
            break
        if part in ("persistent", "non-persistent") and len(parts) == index + 3:
            parts[index + 1 : index + 3] = ["{namespace}"]  # the namespace's topics
            break
        if part == "namespaces" and len(parts) >= index + 3:
            parts[index + 1 : index + 3] = ["{namespace}"]
            break
    return f"{method} {'/'.join(parts)}"


class ClusterAdminClient:
    def __init__(
        self,
        admin_url: str,
        *,
        cluster_name: str,
        token: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        timeout_s: float = limits.cluster_admin_request_timeout_s_default,
    ) -> None:
        self.admin_url = admin_url.rstrip("/")
        if tls.uses_tls(admin_url) and ssl_context is None:
            raise AdminRequestFailed(f"{admin_url}: an https URL needs the cluster's TLS settings")
        #: The context every https request is verified with; False for http.
        self._ssl: ssl.SSLContext | bool = False
        if ssl_context is not None and tls.uses_tls(admin_url):
            self._ssl = ssl_context
        self.cluster_name = cluster_name
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None
        #: Topics (base names) known to exist with their partitions on this cluster.
        self._ensured: dict[str, int] = {}
        #: ``ensure_topic`` calls under way, per topic and partition count: every
        #: partition's replicator of a topic asks at once, and one of them does the work.
        self._ensuring: dict[tuple[str, int], asyncio.Future[None]] = {}
        #: Requests sent by kind (:func:`request_kind`): the gateway's ``/stats``, what it
        #: costs the cluster.
        self.requests_by_kind: collections.Counter[str] = collections.Counter()
        #: The brokers' web addresses (``metrics_text``), when last read, and whether
        #: listing them was refused.
        self._broker_web_urls: list[str] = []
        self._brokers_read_at: float | None = None
        self._brokers_refused = False
        #: Why the last request found no connection; None once one is answered.
        self.connect_error: str | None = None
        #: What this cluster refused the gateway's role (401, 403), by request kind.
        self.refusals = Refusals(cluster_name)

    def _unreachable(self, reason: str) -> None:
        """One WARNING per cluster and cause, however many requests meet it."""
        if reason != self.connect_error:
            log.warning("cluster %s: admin REST %s: %s", self.cluster_name, self.admin_url, reason)
        self.connect_error = reason

    @property
    def requests_sent(self) -> int:
        return self.requests_by_kind.total()

    def __repr__(self) -> str:
        return f"ClusterAdminClient({self.cluster_name} at {self.admin_url})"

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        allowed: tuple[int, ...] = (),
        params: Mapping[str, str] | None = None,
        extra_s: float = 0.0,
    ) -> tuple[int, Any]:
        """(status, parsed JSON or None). Statuses in ``allowed`` and 2xx are answers;
        anything else raises. ``extra_s``: seconds the server may hold the request on
        purpose (a long poll), added to the deadline."""
        session = self._open_session()
        url = f"{self.admin_url}{path}"
        kind = request_kind(method, path)
        self.requests_by_kind[kind] += 1
        timeout = None
        if extra_s:
            timeout = aiohttp.ClientTimeout(total=(self._timeout.total or 0) + extra_s)
        try:
            # A POST says JSON even without a body (rest/access.py).
            headers = {"Content-Type": "application/json"} if method == "POST" else None
            async with session.request(
                method, url, json=body, headers=headers, params=params, timeout=timeout
            ) as response:
                text = await response.text()
                status = response.status
        except aiohttp.ClientConnectorError as error:  # no connection: refused, or TLS
            tls_failed = isinstance(error, aiohttp.ClientSSLError)
            reason = tls.describe(error.os_error) if tls_failed else f"cannot connect: {error}"
            self._unreachable(reason)
            raise AdminRequestFailed(
                f"{self.cluster_name}: {method} {path}: {reason}",
                unreachable=True,
                tls_failed=tls_failed,
            ) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise AdminRequestFailed(f"{self.cluster_name}: {method} {path}: {error!r}") from None
        if self.connect_error is not None:
            log.info("cluster %s: admin REST reachable again", self.cluster_name)
            self.connect_error = None
        if status in REFUSING_STATUSES and status not in allowed:
            self.refusals.refused(_right(kind, path), f"{status} {_refusal_reason(status, text)}")
        elif 200 <= status < 300:
            self.refusals.allowed(_right(kind, path))
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
            "GET", f"{V2}/persistent/{_segment(tenant)}/{_segment(name)}", allowed=(404,)
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

    async def internal_stats(self, topic: TopicName) -> dict[str, Any]:
        """``internalStats`` of ``topic``: its ledgers and every cursor (Pulsar's
        ``markDeletePosition`` / ``individuallyDeletedMessages`` spelling)."""
        _, document = await self._request("GET", f"{_path(topic)}/internalStats")
        return document if isinstance(document, dict) else {}

    async def last_entry(self, topic: TopicName) -> Position | None:
        """The last entry ``topic`` stores, markers included (``internalStats``); None
        while it stores none."""
        return last_entry(await self.internal_stats(topic))

    async def topic_stats(self, topic: TopicName) -> dict[str, Any]:
        """``stats`` of ``topic``: per subscription its consumers and flags."""
        _, document = await self._request("GET", f"{_path(topic)}/stats")
        return document if isinstance(document, dict) else {}

    async def sync_state(self, topic: TopicName) -> dict[str, Any]:
        """Every subscription's acknowledgement state on ``topic`` (a non-partitioned
        topic or one partition), unpersisted acknowledgements included, the gateway's own
        (``georep.*``) left out::

            {"last": (ledger, entry) | None,      # the topic's last entry
             "subscriptions": {name: SubscriptionState, ...}}

        AdminRequestFailed: status 404 for a topic (or namespace) that does not exist,
        the status of any other refusal, 200 for an answer that does not parse."""
        path = f"{_path(topic, GEOREP_V1)}/sync-state"
        _, document = await self._request("GET", path)
        try:
            last = document["lastPosition"]
            return {
                "last": None if last is None else _position(last),
                "subscriptions": {
                    str(name): _subscription_state(state)
                    for name, state in document["subscriptions"].items()
                },
            }
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise AdminRequestFailed(
                f"{self.cluster_name}: GET {path}: malformed answer ({error!r})", 200
            ) from None

    async def sync_changes(
        self, namespace: str, *, epoch: str | None, after: int, wait_s: float
    ) -> dict[str, Any]:
        """The change feed of ``namespace`` (georep clusters only; a long poll of up to
        ``wait_s``): ``{"epoch", "sequence", "topics", "reset"}`` as
        ``broker/change_feed.py`` says. AdminRequestFailed as for :meth:`sync_state`."""
        tenant, _, name = namespace.partition("/")
        path = f"{GEOREP_V1}/namespaces/{_segment(tenant)}/{_segment(name)}/sync-changes"
        params = {"after": str(after), "waitMs": str(int(wait_s * 1000))}
        if epoch:
            params["epoch"] = epoch
        _, document = await self._request("GET", path, params=params, extra_s=wait_s)
        try:
            return {
                "epoch": str(document["epoch"]),
                "sequence": int(document["sequence"]),
                "topics": [str(topic) for topic in document["topics"]],
                "reset": bool(document["reset"]),
            }
        except (KeyError, TypeError, ValueError) as error:
            raise AdminRequestFailed(
                f"{self.cluster_name}: GET {path}: malformed answer ({error!r})", 200
            ) from None

    async def metrics_text(self) -> str:
        """Every active broker's Prometheus page (``/metrics/``), joined as text. A
        broker's page shows only the topics it owns, and a cluster of several brokers
        spreads them (``GET /admin/v2/brokers/<cluster>`` names each by its web
        address: one request more per read). A role that may not list the brokers (401,
        403) reads the admin URL's page alone, which is the whole cluster only when it
        has one broker."""
        urls = await self._broker_urls()
        return "\n".join([await self._metrics_page(url) for url in urls])

    async def _broker_urls(self) -> list[str]:
        """The brokers' web addresses, read again every
        ``limits.cluster_brokers_refresh_s``; a refused listing is asked again only after
        ``limits.cluster_brokers_refused_retry_s`` (Pulsar logs every refusal with a stack
        trace: once a second would fill its log), and said once."""
        now = time.monotonic()
        wait_s = (
            limits.cluster_brokers_refused_retry_s
            if self._brokers_refused
            else limits.cluster_brokers_refresh_s
        )
        if self._brokers_read_at is None or now - self._brokers_read_at >= wait_s:
            status, brokers = await self._request(
                "GET", f"{V2}/brokers/{_segment(self.cluster_name)}", allowed=(401, 403)
            )
            self._brokers_read_at = now
            refused = status in (401, 403)
            if refused and not self._brokers_refused:
                log.info(
                    "cluster %s: the gateway's role may not list the brokers (HTTP %d): the"
                    " metrics page of %s alone is read, which covers every topic only with"
                    " one broker (docs/PULSAR.md, least privilege)",
                    self.cluster_name,
                    status,
                    self.admin_url,
                )
            self._brokers_refused = refused
            scheme = self.admin_url.partition("://")[0]
            listed = brokers if status == 200 and isinstance(brokers, list) else []
            self._broker_web_urls = [f"{scheme}://{broker}" for broker in listed]
        return self._broker_web_urls or [self.admin_url]

    def _open_session(self) -> aiohttp.ClientSession:
        """The one session of this client, over TLS where the admin URL says so."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=self._timeout,
                headers=self._headers,
                connector=aiohttp.TCPConnector(ssl=self._ssl),
            )
        return self._session

    async def _metrics_page(self, base_url: str) -> str:
        session = self._open_session()
        url = f"{base_url}/metrics/"
        self.requests_by_kind[request_kind("GET", "/metrics/")] += 1
        try:
            async with session.get(url) as response:
                text = await response.text()
                status = response.status
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise AdminRequestFailed(f"{self.cluster_name}: GET /metrics/: {error!r}") from None
        if status != 200:
            raise AdminRequestFailed(
                f"{self.cluster_name}: GET /metrics/ answered {status}: {text[:300]}", status
            )
        return text

    async def partitioned_stats(self, topic: TopicName) -> dict[str, Any]:
        """``partitioned-stats?perPartition=true`` of a partitioned ``topic`` (a base
        name): every partition's ``stats`` in one answer, under ``partitions``."""
        _, document = await self._request(
            "GET", f"{_path(topic)}/partitioned-stats", params={"perPartition": "true"}
        )
        return document if isinstance(document, dict) else {}

    async def schema(self, topic: TopicName, version: int) -> pb.Schema | None:
        """Version ``version`` of ``topic``'s schema (``/admin/v2/schemas/.../schema/{v}``,
        the base name's), as the protocol's Schema; None if the cluster does not hold it."""
        base = topic.base
        path = (
            f"{V2}/schemas/{_segment(base.tenant)}/{_segment(base.namespace_local)}"
            f"/{_segment(base.local_name)}/schema/{version}"
        )
        status, document = await self._request("GET", path, allowed=(404,))
        if status == 404 or not isinstance(document, dict):
            return None
        try:
            schema = pb.Schema(
                name=str(base),
                type=pb.Schema.Type.Name(pb.Schema.Type.Value(str(document["type"]))),
                data=str(document["data"]).encode(),
            )
            for key, value in sorted(dict(document.get("properties") or {}).items()):
                schema.properties.add(key=str(key), value=str(value))
        except (KeyError, ValueError, TypeError) as error:
            raise AdminRequestFailed(
                f"{self.cluster_name}: GET {path}: not a schema document: {error!r}"
            ) from None
        return schema

    # -- changes --

    async def ensure_topic(self, topic: TopicName, partitions: int) -> None:
        """Make sure ``topic``'s tenant and namespace exist here and, when ``partitions``
        is above 0, that ``topic`` (a base name) is partitioned that many ways.

        A role that may not read the namespace's policies (Pulsar: only a tenant's
        admins may, 403) may not create it either: the namespace is then the operator's
        to create, and the partitioned topic too (docs/PULSAR.md "Least privilege").

        Callers asking the same at once share one round of requests (a gateway starting
        beside a topic of N partitions asks N times together)."""
        if self._ensured.get(str(topic)) == partitions:
            return
        key = (str(topic), partitions)
        running = self._ensuring.get(key)
        if running is None:
            running = self._ensuring[key] = asyncio.ensure_future(
                self._ensure_topic(topic, partitions)
            )
            running.add_done_callback(lambda _: self._ensuring.pop(key, None))
        await asyncio.shield(running)

    async def _ensure_topic(self, topic: TopicName, partitions: int) -> None:
        key = str(topic)
        status, _ = await self._request(
            "GET", f"{V2}/namespaces/{_segment(topic.tenant)}/{_segment(topic.namespace_local)}",
            allowed=(404, *REFUSING_STATUSES),
        )  # fmt: skip
        if status == 404:
            await self._request(
                "PUT",
                f"{V2}/tenants/{_segment(topic.tenant)}",
                body={"adminRoles": [], "allowedClusters": [self.cluster_name]},
                allowed=(409,),
            )
            created, _ = await self._request(
                "PUT",
                f"{V2}/namespaces/{_segment(topic.tenant)}/{_segment(topic.namespace_local)}",
                allowed=(409,),
            )
            if created != 409:
                log.info("%s: created namespace %s", self.cluster_name, topic.namespace)
        if partitions > 0:
            existing = await self.partitions(topic)
            if not existing:
                status, _ = await self._request(
                    "PUT", f"{_path(topic)}/partitions", body=partitions, allowed=(409,)
                )
                if status != 409:  # one line a topic, whoever created it
                    log.info(
                        "%s: created %s with %d partitions", self.cluster_name, topic, partitions
                    )
            elif existing != partitions:
                log.warning(
                    "%s: %s has %d partitions here, %d at the origin; partitions beyond %d"
                    " are not replicated",
                    self.cluster_name, topic, existing, partitions, existing,
                )  # fmt: skip
        self._ensured[key] = partitions

    async def sync_subscription(
        self,
        topic: TopicName,
        subscription: str,
        *,
        mark_delete: Position | None = None,
        ranges: Iterable[tuple[Position, Position]] = (),
        batches: Mapping[Position, Iterable[int]] | None = None,
        replicated: bool = False,
    ) -> dict[str, Any]:
        """Bring ``subscription`` (created when missing) to a synced state without
        disconnecting its consumers: mark-delete moved forward to ``mark_delete``, every
        entry inside the closed ``ranges`` acknowledged, and in ``batches`` (entry ->
        indexes of the members acknowledged) those members; ``replicated`` marks it
        replicated. Positions past the topic's last entry are ignored by the cluster.

        More ranges or batches than one request may carry
        (``limits.subscription_sync_*_count_max``, ``limits.admin_request_body_bytes_max``)
        go in several requests, the first carrying ``mark_delete`` and ``replicated``.
        Returns the last answer, ``{"markDelete": {"ledgerId", "entryId"},
        "rangesCount": n, "created": bool}``, with ``created`` true if any request
        created the subscription. AdminRequestFailed as for :meth:`sync_state`; 400 for a
        refused body (a batch index past its batch's size, a ``georep.*`` name), in which
        case that request changed nothing."""
        path = f"{_path(topic, GEOREP_V1)}/subscription/{_segment(subscription)}/sync"
        created = False
        answer: Any = None
        for body in _sync_bodies(mark_delete, ranges, batches or {}, replicated):
            _, answer = await self._request("POST", path, body=body)
            created = created or bool((answer or {}).get("created"))
        return {**(answer or {}), "created": created}

    async def delete_subscription(self, topic: TopicName, subscription: str) -> bool:
        """False if there was no such subscription (or topic)."""
        status, _ = await self._request(
            "DELETE", f"{_path(topic)}/subscription/{_segment(subscription)}", allowed=(404,)
        )
        return status != 404


def _right(kind: str, path: str) -> str:
    """What a refusal is kept under: the request's kind and, rights being granted per
    namespace, the namespace it names (``GET /admin/v2/persistent/{topic}/stats on t/ns``)."""
    parts = path.split("?", 1)[0].split("/")
    for index, part in enumerate(parts):
        if part in ("persistent", "non-persistent", "namespaces") and len(parts) >= index + 3:
            return f"{kind} on {parts[index + 1]}/{parts[index + 2]}"
    return kind


def _refusal_reason(status: int, text: str) -> str:
    """Pulsar's reason for a refusal (``{"reason": ...}``); its authentication filter
    answers 401 with an HTML page instead, which says only that the token was refused."""
    try:
        reason = json.loads(text).get("reason")
    except (ValueError, AttributeError):
        reason = None
    if isinstance(reason, str) and reason:
        return reason[:300]
    if status == 401:
        return "authentication failed: the token is missing, expired or not the cluster's"
    return "forbidden"


# --- subscription sync documents ---------------------------------------------------------
def last_entry(internal: dict[str, Any]) -> Position | None:
    """The last entry an ``internalStats`` document's topic stores: its
    ``lastConfirmedEntry``, or, when that is ``L:-1`` (ledger L holds nothing yet), the
    last entry of the latest earlier ledger that holds one. ValueError when the document
    says neither.

    >>> last_entry({"lastConfirmedEntry": "7:12", "ledgers": []})
    Position(ledger_id=7, entry_id=12)
    >>> ledgers = [{"ledgerId": 5, "entries": 3}, {"ledgerId": 7, "entries": 0}]
    >>> last_entry({"lastConfirmedEntry": "7:-1", "ledgers": ledgers})
    Position(ledger_id=5, entry_id=2)
    >>> last_entry({"lastConfirmedEntry": "7:-1", "ledgers": ledgers[1:]}) is None
    True
    """
    text = internal.get("lastConfirmedEntry")
    if not isinstance(text, str):
        raise ValueError(f"internalStats without lastConfirmedEntry: {sorted(internal)[:8]}")
    last = Position.parse(text)
    if last.entry_id >= 0:
        return last
    for ledger in reversed(internal.get("ledgers") or []):
        ledger_id, entries = ledger.get("ledgerId"), ledger.get("entries")
        if isinstance(ledger_id, int) and isinstance(entries, int) and entries > 0:
            if ledger_id < last.ledger_id:
                return Position(ledger_id, entries - 1)
    return None


def _position(document: Any) -> Position:
    ledger_id, entry_id = document["ledgerId"], document["entryId"]
    if not (isinstance(ledger_id, int) and isinstance(entry_id, int)):
        raise ValueError(f"not a position: {document!r}")
    return Position(ledger_id, entry_id)


def _position_document(position: Position) -> dict[str, int]:
    ledger_id, entry_id = position
    return {"ledgerId": int(ledger_id), "entryId": int(entry_id)}


def _subscription_state(document: Any) -> SubscriptionState:
    batches = {}
    for batch in document["batches"]:
        batches[_position(batch)] = (int(batch["batchSize"]), frozenset(batch["ackedIndexes"]))
    sub_type = document["type"]
    return SubscriptionState(
        mark_delete=_position(document["markDelete"]),
        ranges=tuple(
            (_position(item["first"]), _position(item["last"])) for item in document["ranges"]
        ),
        batches=batches,
        consumers=int(document["consumers"]),
        consumers_attached=int(document.get("consumersAttached", 0)),
        replicated=bool(document["replicated"]),
        sub_type=None if sub_type is None else str(sub_type),
        ranges_truncated=bool(document.get("rangesTruncated", False)),
        batches_truncated=bool(document.get("batchesTruncated", False)),
    )


def _sync_bodies(
    mark_delete: Position | None,
    ranges: Iterable[tuple[Position, Position]],
    batches: Mapping[Position, Iterable[int]],
    replicated: bool,
) -> list[dict[str, Any]]:
    """The request bodies of one sync: ranges and batch items packed greedily, each body
    within the per-request counts and the body size limit (estimated from each item's
    JSON); at least one body, the first with ``markDelete`` and ``replicated``."""
    items: list[tuple[str, dict[str, Any]]] = [
        ("ranges", {"first": _position_document(low), "last": _position_document(high)})
        for low, high in ranges
    ]
    for position, indexes in sorted(batches.items()):
        ordered = sorted(set(indexes))
        for start in range(0, max(1, len(ordered)), limits.sync_request_batch_indexes_per_item_max):
            chunk = ordered[start : start + limits.sync_request_batch_indexes_per_item_max]
            items.append(("batches", {**_position_document(position), "ackedIndexes": chunk}))
    head: dict[str, Any] = {}
    if mark_delete is not None:
        head["markDelete"] = _position_document(mark_delete)
    if replicated:
        head["replicated"] = True
    counts_max = {
        "ranges": limits.subscription_sync_ranges_count_max,
        "batches": limits.subscription_sync_batches_count_max,
    }
    room = limits.admin_request_body_bytes_max - limits.sync_request_slack_bytes
    bodies: list[dict[str, Any]] = []
    body: dict[str, Any] = dict(head)
    size = len(json.dumps(body))
    for kind, item in items:
        item_size = len(json.dumps(item)) + 2
        full = len(body.get(kind, ())) >= counts_max[kind] or size + item_size > room
        if full and ("ranges" in body or "batches" in body):
            bodies.append(body)
            body, size = {}, 2
        if kind not in body:
            body[kind] = []
            size += len(kind) + 6
        body[kind].append(item)
        size += item_size
    bodies.append(body)
    return bodies
