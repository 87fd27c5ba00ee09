"""The part of Pulsar's admin v2 REST that georep's tests, drill and benchmarks use.

Blocking (``urllib``): callers are test fixtures, benchmark set-up and the drill's
topology, which run it in a thread. Each call is one request with a deadline; an answer
other than 2xx is a :class:`PulsarAdminError` carrying the status and Pulsar's reason.

Geo-replication between standalones (:func:`link_geo_replication`): every standalone
keeps its own configuration store, so each one is told about every other cluster (its
service and broker URLs), and the tenant (allowed clusters) and namespace (replication
clusters) are created on each. A cluster whose URLs are ``pulsar+ssl://`` and ``https://``
is registered with ``serviceUrlTls`` and ``brokerServiceUrlTls``, which Pulsar's
replicator connects to when the broker's ``brokerClientTlsEnabled`` is on (a secured
standalone's, ``security.py``). From then on Pulsar's own replicator copies every topic
of the namespace to the others, and replicated subscriptions (consumers created with
``replicate_subscription_state_enabled=True``) have their mark-delete position synced.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any, Protocol

from georep import limits


class PulsarAdminError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, reason: str) -> None:
        super().__init__(f"{method} {path}: {status} {reason}")
        self.status = status


class _RedirectsAreOurs(urllib.request.HTTPRedirectHandler):
    """urllib follows a redirect for GET only and drops the body; :meth:`PulsarAdmin.request`
    follows them itself, for every method."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _redirected(method: str, path: str, url: str, location: str) -> str:
    target = urllib.parse.urljoin(url, location)
    if urllib.parse.urlsplit(url).scheme == "https" and not target.startswith("https://"):
        raise PulsarAdminError(method, path, 307, f"refused a redirect from https to {target}")
    return target


class ClusterEndpoint(Protocol):
    """What :func:`link_geo_replication` needs of a cluster."""

    @property
    def name(self) -> str: ...
    @property
    def service_url(self) -> str: ...
    @property
    def admin_url(self) -> str: ...


def topic_path(topic: str) -> str:
    """``persistent://t/ns/x`` -> ``persistent/t/ns/x``, each segment quoted."""
    scheme, _, rest = topic.partition("://")
    if scheme not in ("persistent", "non-persistent") or rest.count("/") != 2:
        raise ValueError(f"not a fully qualified topic name: {topic!r}")
    return "/".join([scheme, *(urllib.parse.quote(part, safe="") for part in rest.split("/"))])


class PulsarAdmin:
    """``token``: sent as a bearer token; ``context``: how an ``https://`` URL is verified."""

    def __init__(
        self,
        admin_url: str,
        *,
        token: str | None = None,
        context: ssl.SSLContext | None = None,
        timeout_s: float = 30.0,
    ):
        self.admin_url = admin_url.rstrip("/")
        self.token = token
        self._opener = urllib.request.build_opener(
            urllib.request.HTTPSHandler(context=context), _RedirectsAreOurs()
        )
        self.timeout_s = timeout_s

    def _document(self, path: str) -> dict[str, Any]:
        """``GET path``: a JSON object."""
        document: dict[str, Any] = self.request("GET", path)
        return document

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One call; a 307 or 308 (a broker naming the owner of a bundle or topic) is
        followed with the same method and body, at most ``pulsar_admin_redirects_max``
        times, and never from ``https`` to ``http``."""
        data = None if body is None else json.dumps(body).encode()
        url = f"{self.admin_url}{path}"
        for _ in range(limits.pulsar_admin_redirects_max + 1):
            request = urllib.request.Request(url, data=data, method=method)
            if data is not None or method == "POST":  # every POST must say JSON
                request.add_header("Content-Type", "application/json")
            if self.token:
                request.add_header("Authorization", f"Bearer {self.token}")
            try:
                with self._opener.open(request, timeout=self.timeout_s) as response:
                    payload = response.read()
            except urllib.error.HTTPError as error:
                location = error.headers.get("Location")
                if error.code in (307, 308) and location:
                    error.close()
                    url = _redirected(method, path, url, location)
                    continue
                reason = error.read().decode(errors="replace")[:500] or error.reason
                raise PulsarAdminError(method, path, error.code, reason) from None
            return json.loads(payload) if payload else None
        raise PulsarAdminError(
            method, path, 307, f"more than {limits.pulsar_admin_redirects_max} redirects"
        )

    # clusters, tenants, namespaces -------------------------------------------------

    def _create_or_update(self, path: str, body: dict[str, Any]) -> None:
        """PUT creates; where it exists already (409), POST updates it to ``body``."""
        try:
            self.request("PUT", path, body)
        except PulsarAdminError as error:
            if error.status != 409:
                raise
            self.request("POST", path, body)

    def ensure_cluster(self, name: str, service_url: str, broker_service_url: str) -> None:
        """``service_url`` is the cluster's admin URL, as Pulsar names it; TLS URLs
        (``https://``, ``pulsar+ssl://``) go under Pulsar's ``*Tls`` keys."""
        tls = service_url.startswith("https://")
        if tls != broker_service_url.startswith("pulsar+ssl://"):
            raise ValueError(f"cluster {name}: one TLS URL beside one plaintext URL")
        if tls:
            body = {"serviceUrlTls": service_url, "brokerServiceUrlTls": broker_service_url}
        else:
            body = {"serviceUrl": service_url, "brokerServiceUrl": broker_service_url}
        self._create_or_update(f"/admin/v2/clusters/{name}", body)

    def ensure_tenant(self, tenant: str, allowed_clusters: Sequence[str]) -> None:
        body = {"adminRoles": [], "allowedClusters": list(allowed_clusters)}
        self._create_or_update(f"/admin/v2/tenants/{tenant}", body)

    def ensure_namespace(self, tenant: str, namespace: str) -> None:
        try:
            self.request("PUT", f"/admin/v2/namespaces/{tenant}/{namespace}")
        except PulsarAdminError as error:
            if error.status != 409:
                raise

    def set_replication_clusters(
        self, tenant: str, namespace: str, clusters: Sequence[str]
    ) -> None:
        self.request(
            "POST", f"/admin/v2/namespaces/{tenant}/{namespace}/replication", list(clusters)
        )

    def replication_clusters(self, tenant: str, namespace: str) -> list[str]:
        clusters: list[str] = self.request(
            "GET", f"/admin/v2/namespaces/{tenant}/{namespace}/replication"
        )
        return clusters

    # permissions (authorization on) ----------------------------------------------------

    def grant_permission(self, namespace: str, role: str, actions: Sequence[str]) -> None:
        """``pulsar-admin namespaces grant-permission namespace --role --actions``."""
        quoted = urllib.parse.quote(role, safe="")
        self.request(
            "POST", f"/admin/v2/namespaces/{namespace}/permissions/{quoted}", list(actions)
        )

    def revoke_permission(self, namespace: str, role: str) -> None:
        """``pulsar-admin namespaces revoke-permission namespace --role``: every action."""
        quoted = urllib.parse.quote(role, safe="")
        self.request("DELETE", f"/admin/v2/namespaces/{namespace}/permissions/{quoted}")

    def permissions(self, namespace: str) -> dict[str, list[str]]:
        """role -> actions granted on ``namespace``."""
        granted: dict[str, list[str]] = self.request(
            "GET", f"/admin/v2/namespaces/{namespace}/permissions"
        )
        return granted

    # topics and cursors ------------------------------------------------------------

    def internal_stats(self, topic: str) -> dict[str, Any]:
        """The managed ledger and, per cursor, ``markDeletePosition`` and
        ``individuallyDeletedMessages`` (``"[(3:1..3:5],(3:9..3:12]]"``)."""
        return self._document(f"/admin/v2/{topic_path(topic)}/internalStats")

    def stats(self, topic: str) -> dict[str, Any]:
        return self._document(f"/admin/v2/{topic_path(topic)}/stats")

    def last_message_id(self, topic: str) -> dict[str, Any]:
        return self._document(f"/admin/v2/{topic_path(topic)}/lastMessageId")

    def create_subscription(self, topic: str, subscription: str, *, earliest: bool) -> None:
        position = {"ledgerId": -1, "entryId": -1} if earliest else None
        quoted = urllib.parse.quote(subscription, safe="")
        try:
            self.request("PUT", f"/admin/v2/{topic_path(topic)}/subscription/{quoted}", position)
        except PulsarAdminError as error:
            if error.status != 409:
                raise


def link_geo_replication(
    clusters: Sequence[ClusterEndpoint],
    tenant: str,
    namespace: str,
    *,
    token: str | None = None,
    context: ssl.SSLContext | None = None,
) -> None:
    """Pulsar's own geo-replication of ``tenant/namespace`` among ``clusters``; ``token``
    and ``context`` (a superuser's token, the CA) for clusters with security on."""
    names = [cluster.name for cluster in clusters]
    for local in clusters:
        admin = PulsarAdmin(local.admin_url, token=token, context=context)
        for remote in clusters:
            if remote is not local:
                admin.ensure_cluster(remote.name, remote.admin_url, remote.service_url)
        admin.ensure_tenant(tenant, names)
        admin.ensure_namespace(tenant, namespace)
        admin.set_replication_clusters(tenant, namespace, names)
