"""The broker service: the topics this broker serves, and the names they live under.

Topics are loaded on first use (a producer, a consumer, a last-message-id query) and stay
loaded until the broker stops; every ``trim_interval_s`` each loaded topic's fully
acknowledged ledgers are trimmed. Loading opens the topic's managed ledger (creating it if
new, which is Pulsar's auto-creation of non-partitioned topics) and rebuilds its
deduplication state. Concurrent first uses of one topic share one load.

Name rules checked before any load: the namespace exists; a partition's index is below
its partitioned topic's partition count; a partitioned topic's own name is not a topic
(its partitions are). Lookups always answer with this broker's own URL: it owns every
topic.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass

from georep import limits
from georep.broker.catalog import Catalog
from georep.broker.errors import (
    NamespaceNotFound,
    NotAllowed,
    ServiceNotReady,
    TopicExists,
    TopicNotFound,
)
from georep.broker.namespaces import Namespaces
from georep.broker.topic import PersistentTopic
from georep.broker.topic_name import TopicName

log = logging.getLogger(__name__)


@dataclass
class BrokerConfig:
    cluster_name: str = "standalone"
    #: The URL clients are told to connect to (lookup answers).
    service_url: str = "pulsar://127.0.0.1:6650"
    keepalive_interval_s: float = limits.keepalive_interval_s_default
    trim_interval_s: float = limits.topic_trim_interval_s_default
    #: Seconds of the window every rate in topic stats is measured over.
    stats_rate_window_s: int = limits.stats_rate_window_s_default
    version: str = "georep-broker"
    #: Settings of every topic's managed ledger (ensemble, quorums, rollover, retention);
    #: None: the managed ledger's defaults.
    managed_ledger_config: object = None


class BrokerService:
    def __init__(
        self, config: BrokerConfig, factory, catalog: Catalog, namespaces: Namespaces, store
    ) -> None:
        self.config = config
        self.factory = factory
        #: The metadata store (managed-ledger rows, tenants and namespaces).
        self.factory_store = store
        self.catalog = catalog
        self.namespaces = namespaces
        self.topics: dict[str, PersistentTopic] = {}
        self._loading: dict[str, asyncio.Task[PersistentTopic]] = {}
        self.closing = False
        self._trimmer = asyncio.get_running_loop().create_task(self._trim_loop())

    @classmethod
    async def start(cls, config: BrokerConfig, factory, store) -> BrokerService:
        """``store`` is the metadata store holding tenants and namespaces."""
        namespaces = Namespaces(store)
        await namespaces.ensure_defaults(config.cluster_name)
        catalog = await Catalog.open(factory, config.managed_ledger_config)
        return cls(config, factory, catalog, namespaces, store)

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
        if name.managed_ledger_name in await self._ledger_names():
            raise TopicExists(f"{name} exists as a non-partitioned topic")
        await self.catalog.create_partitioned_topic(name, partitions)

    async def topics_of_namespace(self, namespace: str) -> list[str]:
        await self.check_namespace(namespace)
        names = set()
        for ledger_name in await self._ledger_names():
            topic = TopicName.from_managed_ledger_name(ledger_name)
            if topic is not None and topic.namespace == namespace:
                names.add(str(topic))
        for partitioned, count in self.catalog.partitioned.items():
            topic = TopicName.parse(partitioned)
            if topic.namespace == namespace:
                names.update(str(topic.partition(index)) for index in range(count))
        return sorted(names)

    async def _ledger_names(self) -> list[str]:
        return list(await self.factory.list_names())

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

    async def _load(self, name: TopicName) -> PersistentTopic:
        ledger = await self.factory.open(
            name.managed_ledger_name, self.config.managed_ledger_config
        )
        try:
            topic = await PersistentTopic.load(
                name,
                ledger,
                on_dead=self._topic_died,
                rate_window_s=self.config.stats_rate_window_s,
            )
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
            for topic in list(self.topics.values()):
                if topic.closed:
                    continue
                try:
                    await topic.ledger.trim()
                except Exception as error:  # the next pass tries again
                    log.warning("trimming %s: %s", topic.name, error)

    async def close(self) -> None:
        self.closing = True
        self._trimmer.cancel()
        await asyncio.gather(self._trimmer, return_exceptions=True)
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
