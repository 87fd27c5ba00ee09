"""The admin REST application: ``create_app`` and a server to run it.

``create_app(settings, cluster)`` is a pure factory: it opens nothing and starts nothing.
The metadata store is opened by the app's cleanup context when the app starts (and closed
when it stops); at start the app also creates tenant ``public`` and namespace
``public/default`` if they are missing, and says in the log whether tokens guard it.

Running it inside a process (what ``georep cluster`` does)::

    server = await AdminServer.start(settings, cluster)   # listens on server.port
    ...
    await server.close()
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

from aiohttp import web

from georep.broker.admin import openapi
from georep.broker.admin.cluster_admin import ClusterAdmin
from georep.broker.admin.metrics import AdminMetrics
from georep.broker.admin.middleware import answer
from georep.broker.admin.routes import ROUTES
from georep.broker.admin.settings import AdminSettings
from georep.broker.admin.state import (
    CATALOG,
    CLUSTER,
    METRICS,
    OPENAPI,
    SCHEMAS,
    SETTINGS,
    STORAGE_HEALTH,
    StorageHealth,
)
from georep.broker.admin.tenants import ensure_defaults
from georep.broker.meta.store import BrokerRepositories
from georep.broker.schema_registry import SchemaRegistry
from georep.rest.middleware import application, register
from georep.rest.server import RestRunner
from georep.runtime.tls_files import TlsFiles
from georep.storage.meta.store import MetadataStore

log = logging.getLogger("georep.broker.admin")


def create_app(
    settings: AdminSettings,
    cluster: ClusterAdmin,
    *,
    store: MetadataStore | None = None,
    storage_health: Callable[[], StorageHealth] | None = None,
    entry_cache: Callable[[], Mapping[str, int]] | None = None,
) -> web.Application:
    """The admin app for ``cluster``. With ``store`` the app uses that open metadata store
    (and leaves closing it to its owner) instead of opening ``settings.metadata_url``;
    with ``storage_health`` ``/health`` and ``/metrics`` report the bookies; with
    ``entry_cache`` ``/metrics`` reports the managed ledgers' entry cache."""
    if not isinstance(settings, AdminSettings):
        raise TypeError(f"settings must be AdminSettings, got {type(settings).__name__}")
    if not isinstance(cluster, ClusterAdmin):
        raise TypeError(f"{type(cluster).__name__} does not implement ClusterAdmin")
    app = application(answer, settings.request_body_bytes_max)
    app[SETTINGS] = settings
    app[CLUSTER] = cluster
    app[METRICS] = AdminMetrics()
    if storage_health is not None:
        app[STORAGE_HEALTH] = storage_health
        app[METRICS].watch_bookies(lambda: storage_health().bookies)
    app[METRICS].watch_entry_cache(entry_cache)
    app[OPENAPI] = openapi.build(ROUTES)
    register(app, ROUTES, settings.access)
    app.cleanup_ctx.append(_metadata_store(store))
    return app


def _metadata_store(
    given: MetadataStore | None,
) -> Callable[[web.Application], AsyncIterator[None]]:
    async def context(app: web.Application) -> AsyncIterator[None]:
        settings = app[SETTINGS]
        store = given or await MetadataStore.open(settings.metadata_url)
        try:
            meta = BrokerRepositories(store.engine)
            app[CATALOG] = meta.catalog
            app[SCHEMAS] = SchemaRegistry(meta.schemas)
            await ensure_defaults(meta.catalog, settings.cluster_name)
            app[METRICS].watch_store(store.engine.stats)
            _log_access(settings)
            yield
        finally:
            app[METRICS].watch_store(None)
            if given is None:
                await store.close()

    return context


def _log_access(settings: AdminSettings) -> None:
    if settings.open:
        log.warning(
            "admin REST is OPEN: no admin token is configured, so anyone who can reach"
            " port %d may create and delete tenants, namespaces, topics and subscriptions;"
            " set GEOREP_ADMIN_TOKENS or --admin-token-file to require tokens",
            settings.port,
        )
    else:
        log.info(
            "admin REST: mutations need one of %d admin tokens, reads an admin or one of"
            " %d read-only tokens",
            len(settings.admin_tokens),
            len(settings.read_only_tokens),
        )


class AdminServer:
    """The admin app listening on ``settings.host:settings.port`` (HTTPS when TLS files are
    set). ``port`` is the bound port, useful when ``settings.port`` is 0."""

    def __init__(self, runner: web.AppRunner, port: int) -> None:
        self._runner = runner
        self.port = port

    @classmethod
    async def start(
        cls,
        settings: AdminSettings,
        cluster: ClusterAdmin,
        *,
        store: MetadataStore | None = None,
        storage_health: Callable[[], StorageHealth] | None = None,
        entry_cache: Callable[[], Mapping[str, int]] | None = None,
    ) -> AdminServer:
        runner = RestRunner(
            create_app(
                settings,
                cluster,
                store=store,
                storage_health=storage_health,
                entry_cache=entry_cache,
            )
        )
        await runner.setup()
        try:
            site = web.TCPSite(
                runner, settings.host, settings.port, ssl_context=_tls_context(settings)
            )
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        port = runner.addresses[0][1]
        scheme = "https" if settings.tls_cert_file else "http"
        log.info("admin REST listening on %s://%s:%d", scheme, settings.host, port)
        return cls(runner, port)

    async def close(self) -> None:
        await self._runner.cleanup()


def _tls_context(settings: AdminSettings) -> ssl.SSLContext | None:
    if settings.tls_cert_file is None or settings.tls_key_file is None:
        return None
    files = TlsFiles(Path(settings.tls_cert_file), Path(settings.tls_key_file))
    client_ca = settings.tls_client_ca_file
    return files.server_context(client_ca_file=Path(client_ca) if client_ca else None)
