"""The gateway: its metadata store, the replication manager and the REST admin, together.

Start order (stop is the reverse): the metadata store (migrated to head; the gateway's
own, not a cluster's), the remote clusters of the configuration written into it, the
configuration's seed policies written where none is stored, this instance joining the
gateways of its cluster (``ownership.py``), the REST admin, then the manager's discovery
loop. A clean stop leaves the membership only after everything it ran has stopped, so
the other instances take its partitions over at once. A gateway restarted after kill -9
resumes every replicator from its subscription on the local topic: nothing of the
replication state lives in the gateway's memory only.
"""

from __future__ import annotations

import contextlib
import logging

from aiohttp import web

from georep.client.errors import LinkError
from georep.gateway.admin_app import Served, create_app
from georep.gateway.config import GatewayConfig
from georep.gateway.manager import ReplicationManager
from georep.gateway.meta.store import GatewayRepositories
from georep.gateway.ownership import Ownership, generated_instance_name
from georep.invariant import present
from georep.replicator.settings import ReplicatorSettings
from georep.rest.server import RestRunner
from georep.runtime.loop_lag import LoopLag
from georep.storage.errors import BadVersion
from georep.storage.meta.store import MetadataStore

log = logging.getLogger(__name__)


class Gateway:
    def __init__(self, config: GatewayConfig, settings: ReplicatorSettings | None = None) -> None:
        self.config = config
        self.settings = settings or ReplicatorSettings(
            messages_per_s=config.messages_per_s,
            bytes_per_s=config.bytes_per_s,
            backoff_s_max=config.retry_backoff_s_max,
        )
        self.store: MetadataStore | None = None
        self.meta: GatewayRepositories | None = None
        self.manager: ReplicationManager | None = None
        self.ownership: Ownership | None = None
        self.loop_lag = LoopLag()
        self._runner: web.AppRunner | None = None
        self.port = config.listen_port

    @property
    def url(self) -> str:
        scheme = "https" if self.config.rest_tls is not None else "http"
        return f"{scheme}://{self.config.listen_host}:{self.port}"

    async def start(self) -> Gateway:
        config = self.config
        self.loop_lag.start()
        try:
            store = self.store = await MetadataStore.open(config.metadata_url)
            meta = self.meta = GatewayRepositories(store.engine)
            await meta.replication_policies.sync_remote_clusters(
                {name: (r.service_url, r.admin_url) for name, r in config.remotes.items()}
            )
            await self._seed_policies()
            self.ownership = Ownership(
                meta.members,
                cluster=config.local.name,
                instance=config.instance or generated_instance_name(),
                lease_s=config.lease_s,
                heartbeat_s=config.heartbeat_s,
                on_change=self._ownership_changed,
            )
            self.manager = ReplicationManager(
                local=config.local,
                remotes=config.remotes,
                store=meta.replication_policies,
                settings=self.settings,
                discovery_interval_s=config.discovery_interval_s,
                stuck_after_s=config.stuck_after_s,
                sync_settings=config.sync,
                replicators_max=config.replicators_max,
                sync_topics_max=config.sync_topics_max,
                ownership=self.ownership,
                sync_policies=meta.subscription_sync_policies,
            )
            await self.ownership.start()
            served = Served(
                config,
                meta.replication_policies,
                self.manager,
                self.ownership,
                meta.subscription_sync_policies,
                self.loop_lag,
            )
            self._runner = RestRunner(create_app(served))
            await self._runner.setup()
            # [gateway] tls_cert_file / tls_key_file: https only, on the one port.
            tls = config.rest_tls.server_context() if config.rest_tls is not None else None
            site = web.TCPSite(
                self._runner, config.listen_host, config.listen_port, ssl_context=tls
            )
            await site.start()
            self.port = int(self._runner.addresses[0][1])  # the port chosen for 0
            if config.open:
                log.warning(
                    "gateway REST is OPEN: no token configured, anyone reaching %s may change"
                    " replication policies; set GEOREP_GATEWAY_TOKENS or [gateway] token_file",
                    self.url,
                )
            await self._check_local_name()
            self.manager.start()
        except BaseException:
            await self.stop()
            raise
        log.info(
            "gateway of %s serving %s; remotes %s",
            config.local.name, self.url, sorted(config.remotes),
        )  # fmt: skip
        return self

    def _ownership_changed(self) -> None:
        if self.manager is not None:
            self.manager.poke()

    async def _seed_policies(self) -> None:
        policies = present(self.meta, "the store is opened first").replication_policies
        seeds = [("namespace", n, c) for n, c in self.config.seed_namespace_policies.items()]
        seeds += [("topic", n, c) for n, c in self.config.seed_topic_policies.items()]
        for scope, name, clusters in seeds:
            with contextlib.suppress(BadVersion):  # a stored policy wins over the file
                await policies.put_replication_policy(scope, name, clusters, expected_version=0)
                log.info("seeded the %s policy of %s: %s", scope, name, list(clusters))

    async def _check_local_name(self) -> None:
        manager = present(self.manager, "the manager is made first")
        try:
            names = await manager.local_admin.cluster_names()
        except LinkError as error:
            log.warning("local cluster's admin REST not reachable yet: %s", error)
            return
        if names and self.config.local.name not in names:
            log.warning(
                "[local] name is %r but the cluster at %s calls itself %s",
                self.config.local.name, self.config.local.admin_url, names,
            )  # fmt: skip

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.manager is not None:
            await self.manager.stop()
            self.manager = None
        if self.ownership is not None:
            await self.ownership.stop()
            self.ownership = None
        if self.store is not None:
            await self.store.close()
            self.store = self.meta = None
        await self.loop_lag.stop()
