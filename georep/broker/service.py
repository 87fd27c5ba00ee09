"""The broker service: the topics this broker serves, and the names they live under.

Topics are loaded on first use (a producer, a consumer, a last-message-id query) and stay
loaded until the broker stops. Loading reads the namespace's policies (retention, TTL;
``topic_policies.py``), opens the topic's managed ledger with them (creating it if new,
which is Pulsar's auto-creation of non-partitioned topics) and rebuilds its
deduplication state. Concurrent first uses of one topic share one load.

Two periodic passes over the loaded topics, each of which first reads every concerned
namespace's policies again, so that a policy change reaches loaded topics within one
interval: every ``trim_interval_s`` each topic's acknowledged ledgers that retention
does not hold are trimmed; every ``message_expiry_interval_s`` each topic whose
namespace has a message TTL expires what is older (``message_expiry.py``).

Name rules checked before any load: the namespace exists; a partition's index is below
its partitioned topic's partition count; a partitioned topic's own name is not a topic
(its partitions are). Lookups always answer with this broker's own URL: it owns every
topic.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass

from georep import limits
from georep.broker.catalog import Catalog
from georep.broker.change_feed import ChangeFeed
from georep.broker.errors import (
    NamespaceNotFound,
    NotAllowed,
    ServiceNotReady,
    TopicExists,
    TopicNotFound,
)
from georep.broker.namespaces import Namespaces
from georep.broker.ports import BrokerMetadata, TopicLogFactory
from georep.broker.schema_registry import SchemaRegistry
from georep.broker.topic import PersistentTopic
from georep.domain.topic_name import TopicName
from georep.storage.errors import NoSuchManagedLedger
from georep.storage.managed_ledger import ManagedLedgerConfig

log = logging.getLogger(__name__)


@dataclass
class BrokerConfig:
    cluster_name: str = "standalone"
    #: The URL clients are told to connect to (lookup answers).
    service_url: str = "pulsar://127.0.0.1:6650"
    keepalive_interval_s: float = limits.keepalive_interval_s_default
    trim_interval_s: float = limits.topic_trim_interval_s_default
    message_expiry_interval_s: float = limits.message_expiry_interval_s_default
    #: Seconds of the window every rate in topic stats is measured over.
    stats_rate_window_s: int = limits.stats_rate_window_s_default
    version: str = "georep-broker"
    #: Settings of every topic's managed ledger (ensemble, quorums, rollover, retention);
    #: None: the managed ledger's defaults. A namespace's retention policy overrides its
    #: retention.
    managed_ledger_config: ManagedLedgerConfig | None = None


class BrokerService:
    def __init__(
        self,
        config: BrokerConfig,
        factory: TopicLogFactory,
        catalog: Catalog,
        namespaces: Namespaces,
        store: BrokerMetadata,
        schemas: SchemaRegistry,
    ) -> None:
        self.config = config
        #: Topics' schemas (``schema_registry.py``).
        self.schemas = schemas
        self.factory = factory
        #: The metadata store (managed-ledger rows, tenants and namespaces).
        self.factory_store = store
        self.catalog = catalog
        self.namespaces = namespaces
        self.topics: dict[str, PersistentTopic] = {}
        #: (when, names) of the last read of every managed ledger's name.
        self._listing: tuple[float, set[str]] | None = None
        #: managed-ledger name -> (topic, namespace), or None for a ledger of no topic.
        self._parsed: dict[str, tuple[str, str] | None] = {}
        #: Which topics' subscriptions changed, per namespace (subscription sync's feed).
        self.change_feed = ChangeFeed()
        self._loading: dict[str, asyncio.Task[PersistentTopic]] = {}
        self.closing = False
        self.stats = {"trim_passes": 0, "expiry_passes": 0}
        loop = asyncio.get_running_loop()
        self._trimmer = loop.create_task(self._trim_loop())
        self._expirer = loop.create_task(self._expiry_loop())

    @classmethod
    async def start(
        cls,
        config: BrokerConfig,
        factory: TopicLogFactory,
        store: BrokerMetadata,
        schemas: SchemaRegistry,
    ) -> BrokerService:
        """``store`` is the metadata store holding tenants and namespaces, ``schemas``
        the topics' schemas."""
        namespaces = Namespaces(store)
        await namespaces.ensure_defaults(config.cluster_name)
        catalog = await Catalog.open(store, factory, config.managed_ledger_config)
        return cls(config, factory, catalog, namespaces, store, schemas)

    # -- names --

    async def check_namespace(self, namespace: str) -> None:
        if not await self.namespaces.exists(namespace):
            raise NamespaceNotFound(f"namespace {namespace} does not exist")

    async def check_topic(self, name: TopicName) -> None:
        """Raise unless ``name`` may be served as a (non-partitioned or partition) topic."""
        await self.check_namespace(name.namespace)
        if name.is_partition:
            partitions = self.catalog.partitions_of(name.base)
            if partitions and name.partition_index >= partitions:
                raise TopicNotFound(
                    f"{name.base} has {partitions} partitions; there is no partition"
                    f" {name.partition_index}"
                )
        elif self.catalog.partitions_of(name):
            raise NotAllowed(
                f"{name} is a partitioned topic: produce to and consume from its partitions"
            )

    async def partitions_of(self, name: TopicName) -> int:
        await self.check_namespace(name.namespace)
        return 0 if name.is_partition else self.catalog.partitions_of(name)

    async def create_partitioned_topic(self, name: TopicName | str, partitions: int) -> None:
        """Register a partitioned topic (the admin API calls this). Partitions are topics
        created on first use."""
        name = TopicName.parse(str(name))
        await self.check_namespace(name.namespace)
        try:  # one row read, not every name: gateways ask for thousands at a start
            await self.factory_store.get_managed_ledger(name.managed_ledger_name)
        except NoSuchManagedLedger:
            pass
        else:
            raise TopicExists(f"{name} exists as a non-partitioned topic")
        await self.catalog.create_partitioned_topic(name, partitions)

    async def topics_of_namespace(self, namespace: str) -> list[str]:
        await self.check_namespace(namespace)
        names = set()
        listed = await self._listed_names()
        if len(self._parsed) > 2 * len(listed) + 1_000:
            self._parsed = {}  # names of deleted ledgers go
        for ledger_name in listed:
            # Parsed once per name: a gateway lists every namespace every few seconds, and
            # at 10,000 topics parsing every name each time was a third of the broker.
            if ledger_name not in self._parsed:
                topic = TopicName.from_managed_ledger_name(ledger_name)
                self._parsed[ledger_name] = None if topic is None else (str(topic), topic.namespace)
            parsed = self._parsed[ledger_name]
            if parsed is not None and parsed[1] == namespace:
                names.add(parsed[0])
        prefix = f"persistent://{namespace}/"  # the catalog holds canonical names
        for partitioned, count in self.catalog.partitioned.items():
            if partitioned.startswith(prefix) and "/" not in partitioned[len(prefix) :]:
                names.update(f"{partitioned}-partition-{index}" for index in range(count))
        return sorted(names)

    def forget_listing(self) -> None:
        """A topic was deleted here: the next listing reads the store."""
        self._listing = None

    def _note_listed(self, ledger_name: str) -> None:
        """A topic was loaded here (it may be new): the listing held shows it at once.
        Forgetting the listing instead made every namespace listing read every name from
        the store while thousands of topics were created (half of a cluster's CPU)."""
        if self._listing is not None:
            self._listing[1].add(ledger_name)

    async def _listed_names(self) -> set[str]:
        """Every managed ledger's name, read from the metadata store at most once per
        ``limits.topic_listing_reuse_s``: a gateway lists each of its namespaces in one
        pass, and each read returns every topic of the cluster."""
        now = time.monotonic()
        if self._listing is None or now - self._listing[0] > limits.topic_listing_reuse_s:
            self._listing = (now, set(await self.factory.list_names()))
        return self._listing[1]

    def new_producer_name(self) -> str:
        return f"{self.config.cluster_name}-{uuid.uuid4().hex[:12]}"

    # -- topics --

    async def get_topic(self, name: TopicName) -> PersistentTopic:
        if self.closing:
            raise ServiceNotReady("the broker is stopping")
        key = str(name)
        await self.check_topic(name)
        topic = self.topics.get(key)
        if topic is not None:
            return topic
        loading = self._loading.get(key)
        if loading is None:
            loading = asyncio.get_running_loop().create_task(self._load(name))
            self._loading[key] = loading
            loading.add_done_callback(lambda _t: self._loading.pop(key, None))
        return await asyncio.shield(loading)

    def loaded_topic(self, name: TopicName) -> PersistentTopic | None:
        return self.topics.get(str(name))

    def _base_ledger_config(self) -> ManagedLedgerConfig:
        return self.config.managed_ledger_config or ManagedLedgerConfig()

    async def _load(self, name: TopicName) -> PersistentTopic:
        policies = await self.namespaces.policies(name.namespace)
        base = self._base_ledger_config()
        ledger = await self.factory.open(name.managed_ledger_name, policies.ledger_config(base))
        self._note_listed(name.managed_ledger_name)
        try:
            topic = await PersistentTopic.load(
                name,
                ledger,
                on_dead=self._topic_died,
                on_subscription_change=self.change_feed.note,
                rate_window_s=self.config.stats_rate_window_s,
            )
            topic.apply_policies(policies, base)
        except BaseException:
            await ledger.close()
            raise
        self.topics[str(name)] = topic
        log.info("topic %s loaded", name)
        return topic

    async def unload_topic(self, name: TopicName) -> None:
        """Close a loaded topic (its producers and consumers are disconnected)."""
        topic = self.topics.pop(str(name), None)
        if topic is not None:
            await topic.close()

    def _topic_died(self, topic: PersistentTopic) -> None:
        """Another owner took the topic's log: forget this instance (the next use loads
        the topic again, as the new owner)."""
        if self.topics.get(str(topic.name)) is topic:
            del self.topics[str(topic.name)]
            asyncio.get_running_loop().create_task(topic.close())

    async def _trim_loop(self) -> None:
        """Delete, now and then, the ledgers of each loaded topic that every cursor has
        acknowledged past (the managed ledger decides what retention still holds)."""
        while True:
            await asyncio.sleep(self.config.trim_interval_s)
            await self.refresh_policies()
            for topic in list(self.topics.values()):
                if topic.closed:
                    continue
                try:
                    await topic.ledger.trim()
                except Exception as error:  # the next pass tries again
                    log.warning("trimming %s: %s", topic.name, error)
            self.stats["trim_passes"] += 1

    async def _expiry_loop(self) -> None:
        """Expire, now and then, what each loaded topic's TTL says is too old."""
        while True:
            await asyncio.sleep(self.config.message_expiry_interval_s)
            await self.refresh_policies()
            for topic in list(self.topics.values()):
                try:
                    await topic.expire_messages(int(time.time() * 1000))
                except Exception as error:  # the next pass tries again
                    log.warning("expiring messages of %s: %s", topic.name, error)
            self.stats["expiry_passes"] += 1

    async def refresh_policies(self) -> None:
        """Read the policies of every loaded topic's namespace and apply them."""
        by_namespace: dict[str, list[PersistentTopic]] = {}
        for topic in list(self.topics.values()):
            by_namespace.setdefault(topic.name.namespace, []).append(topic)
        base = self._base_ledger_config()
        for namespace, topics in by_namespace.items():
            try:
                policies = await self.namespaces.policies(namespace, fresh=True)
            except Exception as error:  # the store is unreachable: keep the last ones
                log.warning("reading the policies of %s: %s", namespace, error)
                continue
            for topic in topics:
                topic.apply_policies(policies, base)

    async def close(self) -> None:
        self.closing = True
        self._trimmer.cancel()
        self._expirer.cancel()
        await asyncio.gather(self._trimmer, self._expirer, return_exceptions=True)
        for task in list(self._loading.values()):
            task.cancel()
        await asyncio.gather(*self._loading.values(), return_exceptions=True)
        for topic in list(self.topics.values()):
            try:
                await topic.close()
            except Exception as error:
                log.warning("closing %s: %s", topic.name, error)
        self.topics.clear()
        await self.catalog.close()
