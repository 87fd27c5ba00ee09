"""Clusters A and B and their gateways: stood up by the drill, or running ones by URL.

**Managed** (:class:`ManagedTopology`): ``georep up``'s own pieces — an
:class:`~georep.up.config.UpConfig` with clusters A and B (``fsync = false``: a process crash
loses nothing, only a power loss would) and gateways replicating the drill's namespace
A→B and B→A, each with ``subscription_sync = {mode = <mode>, ...}``; processes and
gateway TOML files made by ``up.cluster_process`` and ``up.gateway_process``. Every
process listens on port 0 and its port is read from its ready line, as ``up`` does
(``up.with_cluster_ports``, ``up.with_gateway_port``): the gateways' files are written
once both clusters are ready. The processes run as plain
:class:`~georep.runtime.processes.ManagedProcess` children, not ``up``'s supervised ones: a drill
wants a crash to show, not to be restarted, and ``up``'s status lines would mix with
``--json`` on stdout. A start that fails is tried again in a fresh data directory, up to
``limits.drill_start_attempts_max`` times; each failed attempt
is kept as a :class:`StartFailure` (what failed, the logs of its processes) for the
report's warnings, never printed over the progress bar. Failures:

- ``kill``: SIGKILL of A's cluster process and A's gateway, at once;
- ``cut-link``: SIGKILL of both gateways; A keeps running, cut off.

A failback (``--failback``) brings A back with :meth:`Topology.restore`: after ``kill``,
A's cluster process starts again on its data directory and its ports (the ones its first
ready line named, which B's gateway and the drill's clients know), then A's gateway;
after ``cut-link``, both gateways start again. A process that does not come back is a
:class:`DrillError`.

**Running** (:class:`RunningTopology`): URLs given on the command line. ``kill`` is
refused earlier (settings.py); ``cut-link`` sets the drill topic's replication policy to
``[]`` on both gateways over their REST and waits until neither lists a replicator for
the topic any more; the policies are removed again when the drill ends, or when a
failback restores the link.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from georep import limits
from georep.client.admin import ClusterAdminClient
from georep.client.errors import AdminRequestFailed
from georep.domain.topic_name import InvalidTopicName, TopicName
from georep.drill import admin_client
from georep.drill.errors import DrillError
from georep.drill.settings import CUT_LINK, KILL, ClusterUrls
from georep.invariant import present
from georep.runtime.processes import ManagedProcess, ProcessFailed
from georep.up.config import ClusterSpec, GatewaySpec, UpConfig
from georep.up.supervisor import (
    ReadyLineError,
    Supervised,
    cluster_process,
    gateway_process,
    with_cluster_ports,
    with_gateway_port,
)

log = logging.getLogger(__name__)

A, B = "A", "B"


#: What the drill does at the failure (``Topology.fail``).
AtFailure = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class StartFailure:
    """A start attempt that failed and was retried: its number (1..), what failed, and
    the log files of the processes it had started."""

    attempt: int
    error: str
    logs: tuple[Path, ...]


class Topology:
    urls: dict[str, ClusterUrls]
    #: A georep gateway beside each cluster (False: real Pulsar replicates by itself).
    has_gateways = True
    #: The Apache Pulsar release the gateways run beside (beside_pulsar.py); None: georep's
    #: own clusters, or Pulsar alone.
    beside_pulsar: str | None = None
    #: Start attempts that failed before the one that succeeded.
    start_failures: tuple[StartFailure, ...] = ()

    async def start(self) -> None:
        raise NotImplementedError

    async def fail(self, kind: str, topic: str, at_failure: AtFailure | None = None) -> None:
        """Fail A as ``kind`` says. ``at_failure`` runs as near the failure as the
        topology allows (the drill reads A's gateway's exposure there): with the
        drill's own processes and ``kill``, once A's cluster is dead and before A's
        gateway dies; otherwise just before."""
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def restore(self, kind: str, topic: str) -> None:
        """Undo :meth:`fail`: A back with its data (``kill``), or the link (``cut-link``)."""
        raise NotImplementedError

    def replication_missing(self, topic: str) -> list[str]:
        """Without gateways: what of the clusters' own replication of ``topic`` is not
        ready yet (nothing to wait for by default)."""
        return []

    def unexpected_exits(self) -> list[str]:
        """Processes that exited without being asked (before the failure); only those
        the drill started can be watched."""
        return []

    def gateway_stats(self, cluster: str, topic: str | None = None) -> dict[str, Any] | None:
        """A gateway's stats (``topic``'s parts), None when it has no gateway URL or does
        not answer."""
        url = self.urls[cluster].gateway_url
        if not url:
            return None
        try:
            return admin_client.gateway_stats(url, topic)
        except DrillError as error:
            log.debug("gateway %s stats: %s", cluster, error)
            return None

    def replication_backlog(self, topic: str) -> int | None:
        """Entries of ``topic`` A has not replicated to B yet: A's gateway's
        ``replicationBacklog`` of its replicator to B (refreshed by the gateway every
        ``limits.replicator_stats_interval_s_default`` while it replicates); None when
        unknown."""
        return admin_client.replication_backlog(self.gateway_stats(A, topic), topic, B)

    def return_backlog(self, topic: str) -> int | None:
        """Entries of ``topic`` B has not replicated to A yet (a failback waits for 0):
        B's gateway's ``replicationBacklog`` of its replicator to A, once that replicator
        is connected again; None before, or when unknown."""
        stats = self.gateway_stats(B, topic) or {}
        for replicator in admin_client.replicators_of(stats, topic):
            if replicator.get("remoteCluster") == A and replicator.get("connected"):
                return admin_client.count_or_none(replicator.get("replicationBacklog"))
        return None


def up_config(data_dir: Path, namespace: str, subscription_sync: dict[str, Any]) -> UpConfig:
    """A↔B with the drill's namespace replicated both ways, every port 0 (each process
    picks its own)."""
    return UpConfig(
        data_dir=data_dir,
        clusters={name: ClusterSpec(name, 0, 0, fsync=False) for name in (A, B)},
        gateways={
            name: GatewaySpec(
                name,
                0,
                {namespace: [other]},
                dict(subscription_sync),
                discovery_interval_s=limits.drill_discovery_interval_s,
            )
            for name, other in ((A, B), (B, A))
        },
    )


async def fail_beside_gateways(
    kind: str,
    gateways: Mapping[str, ManagedProcess],
    kill_cluster_a: Callable[[], Awaitable[None]],
    at_failure: AtFailure | None,
) -> None:
    """A failure where a gateway runs beside each cluster. ``kill``: A's cluster first (A's
    gateway then can move nothing more to B, and says what B holds at the failure:
    ``at_failure``), then A's gateway; ``cut-link``: both gateways."""
    if kind == KILL:
        await kill_cluster_a()
        victims = [gateways[A]]
    elif kind == CUT_LINK:
        victims = [gateways[A], gateways[B]]
    else:  # settings.py only lets these two through
        raise DrillError(f"unknown failure {kind!r}")
    if at_failure is not None:
        await at_failure()
    for process in victims:
        process.kill()
    for process in victims:
        await process.wait()


class ManagedTopology(Topology):
    def __init__(self, data_dir: Path, namespace: str, subscription_sync: dict[str, Any]) -> None:
        self.data_dir = data_dir
        self.namespace = namespace
        self.subscription_sync = subscription_sync
        self.clusters: dict[str, ManagedProcess] = {}
        self.gateways: dict[str, ManagedProcess] = {}
        self.urls = {}
        #: The configuration with every port learnt: what a restart of A uses.
        self.config: UpConfig | None = None

    async def start(self) -> None:
        last_error = ""
        for attempt in range(limits.drill_start_attempts_max):
            home = self.data_dir if attempt == 0 else self.data_dir / f"retry-{attempt}"
            home.mkdir(parents=True, exist_ok=True)
            try:
                await self._start_once(home)
                return
            except ProcessFailed as error:
                last_error = str(error)
                logs = tuple(
                    process.log_path
                    for process in (*self.clusters.values(), *self.gateways.values())
                    if process.log_path is not None and process.log_path.exists()
                )
                self.start_failures += (StartFailure(attempt + 1, last_error, logs),)
                log.debug("start attempt %d failed: %s", attempt + 1, error)
                await self.stop()
        raise DrillError(
            f"clusters A and B did not start ({limits.drill_start_attempts_max} attempts):"
            f" {last_error}"
        )

    async def _start_once(self, home: Path) -> None:
        config = up_config(home, self.namespace, self.subscription_sync)
        self.gateways = {}
        self.clusters = {name: _unsupervised(cluster_process(config, name)) for name in (A, B)}
        await start_all(self.clusters.values())
        config = _learn_ports(config, self.clusters, with_cluster_ports)
        host = config.host
        if self.namespace != "public/default":
            for name in (A, B):
                admin_url = f"http://{host}:{config.clusters[name].admin_port}"
                await ensure_namespace(admin_url, self.namespace, name)
        self.gateways = {name: _unsupervised(gateway_process(config, name)) for name in (A, B)}
        await start_all(self.gateways.values())
        config = _learn_ports(config, self.gateways, with_gateway_port)
        self.config = config
        self.urls = {
            name: ClusterUrls(
                f"pulsar://{host}:{spec.broker_port}",
                f"http://{host}:{spec.admin_port}",
                f"http://{host}:{config.gateways[name].port}",
            )
            for name, spec in config.clusters.items()
        }

    async def fail(self, kind: str, topic: str, at_failure: AtFailure | None = None) -> None:
        async def kill_cluster_a() -> None:
            self.clusters[A].kill()
            await self.clusters[A].wait()

        await fail_beside_gateways(kind, self.gateways, kill_cluster_a, at_failure)

    async def restore(self, kind: str, topic: str) -> None:
        config = present(self.config, "a started topology knows its ports")
        try:
            if kind == KILL:
                self.clusters[A] = _unsupervised(cluster_process(config, A))
                await self.clusters[A].start()
                self.gateways[A] = _unsupervised(gateway_process(config, A))
                await self.gateways[A].start()
            elif kind == CUT_LINK:
                for name in (A, B):
                    self.gateways[name] = _unsupervised(gateway_process(config, name))
                await start_all(self.gateways[name] for name in (A, B))
            else:
                raise DrillError(f"unknown failure {kind!r}")
        except ProcessFailed as error:
            raise DrillError(f"A did not come back: {error}") from None

    def unexpected_exits(self) -> list[str]:
        return [
            f"{kind} {name} exited with {p.process.returncode}"
            for kind, group in (("cluster", self.clusters), ("gateway", self.gateways))
            for name, p in group.items()
            if p.process is not None and not p.running
        ]

    async def stop(self) -> None:
        for group in (self.gateways, self.clusters):
            await asyncio.gather(
                *(p.terminate(limits.up_stop_grace_s) for p in group.values()),
                return_exceptions=True,
            )


def _unsupervised(process: Supervised) -> ManagedProcess:
    return ManagedProcess(process.args, process.ready_prefix, log_path=process.log_path)


def _learn_ports(
    config: UpConfig,
    processes: dict[str, ManagedProcess],
    learn: Callable[[UpConfig, str, str], UpConfig],
) -> UpConfig:
    """``config`` with the ports each started process's ready line names (``learn``: up's
    ``with_cluster_ports`` or ``with_gateway_port``)."""
    try:
        for name, process in processes.items():
            config = learn(config, name, process.detail)
    except ReadyLineError as error:
        raise DrillError(str(error)) from None
    return config


async def start_all(processes: Iterable[ManagedProcess]) -> None:
    """Start processes together; every start is awaited before the first failure is
    raised, so that none is left starting unobserved."""
    results = await asyncio.gather(*(p.start() for p in processes), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result


async def ensure_namespace(admin_url: str, namespace: str, cluster: str) -> None:
    """The namespace and its tenant on ``cluster``, made as a gateway makes them on a
    remote (:meth:`ClusterAdminClient.ensure_topic` of no partitions)."""
    client = ClusterAdminClient(
        admin_url,
        cluster_name=cluster,
        token=admin_client.client_token_of(admin_client.ADMIN_TOKEN_ENV),
    )
    try:
        await client.ensure_topic(TopicName.of(namespace, "drill"), 0)
    except (AdminRequestFailed, InvalidTopicName) as error:
        raise DrillError(f"namespace {namespace} on {cluster}: {error}") from None
    finally:
        await client.close()


class RunningTopology(Topology):
    def __init__(self, urls: dict[str, ClusterUrls]) -> None:
        self.urls = urls
        self._cut_topics: list[str] = []

    async def start(self) -> None:
        for name, urls in self.urls.items():
            try:
                await asyncio.to_thread(
                    admin_client.request_json,
                    "GET",
                    f"{urls.admin_url}/admin/v2/clusters",
                    token_env=admin_client.ADMIN_TOKEN_ENV,
                )
            except DrillError as error:
                raise DrillError(f"cluster {name} does not answer: {error}") from None

    def _gateway_url(self, name: str) -> str:
        return present(self.urls[name].gateway_url, "cut-link needs the gateways' URLs")

    async def fail(self, kind: str, topic: str, at_failure: AtFailure | None = None) -> None:
        if kind != CUT_LINK:
            raise DrillError("running clusters can only be failed with cut-link")
        if at_failure is not None:
            await at_failure()
        self._cut_topics.append(topic)
        for name in (A, B):
            await asyncio.to_thread(
                admin_client.set_topic_policy, self._gateway_url(name), topic, []
            )
        deadline = time.monotonic() + limits.drill_cut_link_wait_s_max
        while time.monotonic() < deadline:
            live = []
            for name in (A, B):
                stats = await asyncio.to_thread(self.gateway_stats, name, topic) or {}
                live += admin_client.replicators_of(stats, topic)
            if not live:
                return
            await asyncio.sleep(0.1)
        wait_s = limits.drill_cut_link_wait_s_max
        raise DrillError(f"the gateways still replicate {topic} {wait_s:.0f} s after the cut")

    async def restore(self, kind: str, topic: str) -> None:
        if kind != CUT_LINK or topic not in self._cut_topics:
            raise DrillError("running clusters can only be restored after a cut-link")
        self._cut_topics.remove(topic)
        for name in (A, B):
            await asyncio.to_thread(
                admin_client.set_topic_policy, self._gateway_url(name), topic, None
            )

    async def stop(self) -> None:
        for topic in self._cut_topics:
            for name in (A, B):
                with contextlib.suppress(DrillError):
                    await asyncio.to_thread(
                        admin_client.set_topic_policy, self._gateway_url(name), topic, None
                    )
