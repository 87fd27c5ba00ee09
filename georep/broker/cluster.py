"""The embedded cluster: metadata store, bookies, ledger client, managed ledgers, broker.

Start order (stop is the reverse):

1. the metadata store: SQLite at ``DATA/metadata.db`` unless a URL is given, migrated to
   head;
2. bookies: ``bookie_count`` in-process bookies under ``DATA/bookies/bookie-N`` (each
   registers itself in the store), or none when external addresses are given. An
   in-process bookie keeps its port across restarts (``DATA/bookies/ports.json``): ledger
   metadata names bookies by address, so a bookie that came back elsewhere would leave
   every ledger pointing at a dead address;
3. the ledger client (BookKeeper) and the managed-ledger factory, whose ledgers use the
   configured ensemble and quorums;
4. the broker service (catalog with tenant ``public`` and namespace ``public/default``)
   and the Pulsar protocol server, over TLS only when ``tls`` is given (``server.py``);
5. the admin REST (``broker/admin``), if an admin port or admin settings are given: its
   ``AdminServer`` serves Pulsar's admin v2 over ``cluster.admin``, the broker's
   ``ClusterAdmin`` (``topic_admin.BrokerAdmin``), sharing the cluster's metadata store;
   with ``tls`` and no admin settings of its own, over https with the same certificate.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from georep import limits
from georep.broker.meta.catalog import CatalogOutcome, CatalogRepository, NamespaceRecord
from georep.broker.meta.store import BrokerRepositories
from georep.broker.ports import TopicLogFactory
from georep.broker.schema_registry import SchemaRegistry
from georep.broker.server import BrokerServer
from georep.broker.service import BrokerConfig, BrokerService
from georep.invariant import present
from georep.runtime.tls_files import TlsFiles
from georep.storage.bookie.bookie import Bookie, BookieConfig
from georep.storage.client.bookkeeper import BookKeeper
from georep.storage.errors import NotEnoughBookies
from georep.storage.meta.bookies import BookieRepository
from georep.storage.meta.managed_ledgers import ManagedLedgerInfo, ManagedLedgerRepository
from georep.storage.meta.store import MetadataStore

if TYPE_CHECKING:
    from georep.broker.admin import AdminServer, AdminSettings
    from georep.broker.admin.state import StorageHealth
    from georep.broker.topic_admin import BrokerAdmin
    from georep.storage.managed_ledger import ManagedLedgerConfig

log = logging.getLogger(__name__)


@dataclass
class ClusterConfig:
    name: str
    data_dir: Path
    broker_host: str = "127.0.0.1"
    #: 0: any free port
    broker_port: int = 0
    #: None: no admin REST; 0: any free port. ``admin_settings`` (tokens, TLS) wins if set.
    admin_port: int | None = None
    admin_settings: AdminSettings | None = None
    metadata_url: str | None = None
    #: The broker's certificate and key: the Pulsar protocol is then served over TLS only
    #: (``pulsar+ssl://``), and the admin REST, unless ``admin_settings`` say otherwise,
    #: over https. None: plaintext.
    tls: TlsFiles | None = None
    #: With ``tls``: clients of both must present a certificate of this CA (mutual TLS,
    #: Pulsar's ``tlsRequireTrustedClientCertOnConnect`` with ``tlsTrustCertsFilePath``).
    tls_client_ca_file: Path | None = None
    #: Addresses of external bookies; empty: run ``bookie_count`` in-process bookies.
    bookies: list[str] = field(default_factory=list)
    bookie_count: int = 3
    ensemble_size: int = 3
    write_quorum: int = 2
    ack_quorum: int = 2
    #: False skips fsync in the in-process bookies: tests and benchmarks only; a power
    #: loss then loses acknowledged data (a process crash does not).
    fsync: bool = True
    bookie_lease_s: float | None = None
    #: Seconds of the window of the rates in topic stats (``rate_meter.py``).
    stats_rate_window_s: int = limits.stats_rate_window_s_default
    #: Seconds between trim passes (retention) and between expiry passes (message TTL).
    trim_interval_s: float = limits.topic_trim_interval_s_default
    message_expiry_interval_s: float = limits.message_expiry_interval_s_default

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir)
        if not 1 <= self.ack_quorum <= self.write_quorum <= self.ensemble_size:
            raise ValueError(
                "need ensemble >= write quorum >= ack quorum >= 1, got"
                f" {self.ensemble_size}/{self.write_quorum}/{self.ack_quorum}"
            )
        if not self.bookies and self.bookie_count < self.ensemble_size:
            raise ValueError(
                f"{self.bookie_count} bookies cannot hold an ensemble of {self.ensemble_size}"
            )

    @property
    def metadata(self) -> str:
        return self.metadata_url or f"sqlite:///{self.data_dir / 'metadata.db'}"


class Cluster:
    def __init__(
        self,
        config: ClusterConfig,
        *,
        managed_ledger_factory: Callable[
            [BookKeeper, ManagedLedgerRepository, ClusterConfig], TopicLogFactory
        ]
        | None = None,
    ) -> None:
        self.config = config
        self._factory_maker = managed_ledger_factory or _real_factory
        self.store: MetadataStore | None = None
        self.bookies: list[Bookie] = []
        self.bookkeeper: BookKeeper | None = None
        self.factory: TopicLogFactory | None = None
        self.service: BrokerService | None = None
        self.server: BrokerServer | None = None
        self.admin: BrokerAdmin | None = None
        self.admin_url: str | None = None
        self._admin_server: AdminServer | None = None

    @property
    def broker_url(self) -> str:
        return self.server.url if self.server is not None else ""

    async def start(self) -> Cluster:
        config = self.config
        config.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            store = self.store = await MetadataStore.open(config.metadata)
            if not config.bookies:
                await self._start_bookies()
            await self._wait_for_bookies(store.bookies)
            self.bookkeeper = BookKeeper(store.ledgers, store.bookies)
            self.factory = self._factory_maker(self.bookkeeper, store.managed_ledgers, config)
            meta = BrokerRepositories(store.engine)
            service = self.service = await BrokerService.start(
                BrokerConfig(
                    cluster_name=config.name,
                    managed_ledger_config=self._ledger_config(),
                    stats_rate_window_s=config.stats_rate_window_s,
                    trim_interval_s=config.trim_interval_s,
                    message_expiry_interval_s=config.message_expiry_interval_s,
                ),
                self.factory,
                BrokerStore(meta.catalog, store.managed_ledgers),
                SchemaRegistry(meta.schemas),
            )
            self.server = BrokerServer(
                service,
                config.broker_host,
                config.broker_port,
                tls=(
                    config.tls.server_context(client_ca_file=config.tls_client_ca_file)
                    if config.tls is not None
                    else None
                ),
            )
            await self.server.start()
            service.config.service_url = self.server.url
            if config.admin_port is not None or config.admin_settings is not None:
                await self._start_admin(service, store)
        except BaseException:
            await self.stop()
            raise
        log.info("cluster %s ready: %s", config.name, self.broker_url)
        return self

    def _ledger_config(self) -> ManagedLedgerConfig:
        from georep.storage.managed_ledger import ManagedLedgerConfig

        return ManagedLedgerConfig(
            ensemble_size=self.config.ensemble_size,
            write_quorum=self.config.write_quorum,
            ack_quorum=self.config.ack_quorum,
        )

    async def _start_bookies(self) -> None:
        store = present(self.store, "the metadata store opens before the bookies")
        root = self.config.data_dir / "bookies"
        root.mkdir(exist_ok=True)
        ports_file = root / "ports.json"
        ports = json.loads(ports_file.read_text()) if ports_file.exists() else {}
        for index in range(self.config.bookie_count):
            name = f"bookie-{index}"
            options: dict[str, Any] = {}
            if self.config.bookie_lease_s is not None:
                options["lease_s"] = self.config.bookie_lease_s
            bookie = Bookie(
                BookieConfig(
                    data_dir=root / name,
                    host=self.config.broker_host,
                    port=int(ports.get(name, 0)),
                    fsync=self.config.fsync,
                    **options,
                ),
                bookies=store.bookies,
                ledgers=store.ledgers,
            )
            await bookie.start()
            self.bookies.append(bookie)
            ports[name] = int(bookie.address.rsplit(":", 1)[1])
        ports_file.write_text(json.dumps(ports, indent=1, sort_keys=True))

    async def _wait_for_bookies(self, bookies: BookieRepository) -> None:
        needed = self.config.ensemble_size
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limits.cluster_bookies_wait_s_max
        while True:
            alive = await bookies.list_bookies()
            if len(alive) >= needed:
                return
            if loop.time() > deadline:
                raise NotEnoughBookies(
                    f"{len(alive)} bookies registered after"
                    f" {limits.cluster_bookies_wait_s_max} s; need {needed}"
                )
            await asyncio.sleep(0.2)

    async def _start_admin(self, service: BrokerService, store: MetadataStore) -> None:
        from georep.broker.admin import AdminServer, AdminSettings
        from georep.broker.topic_admin import BrokerAdmin

        config = self.config
        settings = config.admin_settings or AdminSettings(
            cluster_name=config.name,
            metadata_url=config.metadata,
            host=config.broker_host,
            port=config.admin_port or 0,
            tls_cert_file=str(config.tls.cert_file) if config.tls is not None else None,
            tls_key_file=str(config.tls.key_file) if config.tls is not None else None,
            tls_client_ca_file=(
                str(config.tls_client_ca_file) if config.tls_client_ca_file is not None else None
            ),
        )
        self.admin = BrokerAdmin(service)
        server = self._admin_server = await AdminServer.start(
            settings,
            self.admin,
            store=store,
            storage_health=self.storage_health if self.bookies else None,
            entry_cache=_entry_cache(self.factory),
        )
        scheme = "https" if settings.tls_cert_file else "http"
        self.admin_url = f"{scheme}://{settings.host}:{server.port}"

    def storage_health(self) -> StorageHealth:
        """The in-process bookies' availability, for ``/health`` and ``/metrics``."""
        from georep.broker.admin.state import StorageHealth

        return StorageHealth(
            [bookie.availability_report() for bookie in self.bookies], self.config.ensemble_size
        )

    async def stop(self) -> None:
        """Stop in reverse order; safe to call on a partly started cluster."""
        steps: list[tuple[str, Callable[[], object]]] = []
        if self._admin_server is not None:
            steps.append(("admin", self._admin_server.close))
        if self.server is not None:
            steps.append(("server", self.server.close))
        if self.service is not None:
            steps.append(("service", self.service.close))
        if self.factory is not None:
            steps.append(("managed ledgers", self.factory.close))
        if self.bookkeeper is not None:
            steps.append(("ledger client", self.bookkeeper.close))
        for bookie in reversed(self.bookies):
            steps.append((f"bookie {bookie.config.data_dir.name}", bookie.stop))
        if self.store is not None:
            steps.append(("metadata store", self.store.close))
        for what, step in steps:
            try:
                await _maybe_await(step())
            except Exception:
                log.warning("stopping %s failed", what, exc_info=True)
        self._admin_server = self.server = self.service = self.factory = None
        self.bookkeeper = self.store = None
        self.bookies = []


def _entry_cache(factory: TopicLogFactory | None) -> Callable[[], Mapping[str, int]] | None:
    """The figures of ``factory``'s entry cache, for ``/metrics`` (a real factory only)."""
    from georep.storage.managed_ledger import ManagedLedgerFactory

    return factory.cache.snapshot if isinstance(factory, ManagedLedgerFactory) else None


def _real_factory(
    bookkeeper: BookKeeper, managed_ledgers: ManagedLedgerRepository, config: ClusterConfig
) -> TopicLogFactory:
    from georep.storage.managed_ledger import ManagedLedgerFactory

    return ManagedLedgerFactory(bookkeeper, managed_ledgers)


class BrokerStore:
    """What the broker asks of the metadata store (``ports.BrokerMetadata``), from the
    two repositories that keep it: the catalog (tenants, namespaces, partitioned topics)
    and the managed ledgers (a topic's row, for its internal stats)."""

    def __init__(
        self, catalog: CatalogRepository, managed_ledgers: ManagedLedgerRepository
    ) -> None:
        self._catalog = catalog
        self._managed_ledgers = managed_ledgers

    async def get_namespace(self, tenant: str, name: str) -> NamespaceRecord | None:
        return await self._catalog.get_namespace(tenant, name)

    async def create_tenant(
        self, name: str, *, admin_roles: Iterable[str] = (), allowed_clusters: Iterable[str] = ()
    ) -> CatalogOutcome:
        return await self._catalog.create_tenant(
            name, admin_roles=admin_roles, allowed_clusters=allowed_clusters
        )

    async def create_namespace(
        self,
        tenant: str,
        name: str,
        *,
        retention: tuple[int, int] | None = None,
        message_ttl_s: int | None = None,
    ) -> CatalogOutcome:
        return await self._catalog.create_namespace(
            tenant, name, retention=retention, message_ttl_s=message_ttl_s
        )

    async def get_managed_ledger(self, name: str) -> ManagedLedgerInfo:
        return await self._managed_ledgers.get_managed_ledger(name)

    async def list_partitioned_topics(self) -> dict[str, int]:
        return await self._catalog.list_partitioned_topics()

    async def create_partitioned_topic(self, name: str, partitions: int) -> CatalogOutcome:
        return await self._catalog.create_partitioned_topic(name, partitions)

    async def delete_partitioned_topic(self, name: str) -> CatalogOutcome:
        return await self._catalog.delete_partitioned_topic(name)


async def _maybe_await(result: object) -> None:
    if inspect.isawaitable(result):
        await result
