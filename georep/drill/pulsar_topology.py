"""Clusters A and B as real Apache Pulsar standalones with Pulsar's own geo-replication
and replicated subscriptions: the anchor a drill measures georep against (mode
``pulsar``). No georep gateway runs.

The drill owns both standalones (``pulsar_tools.standalone``, the development tooling,
imported where used: ``pulsar_tooling.py``; jars resolved from Maven Central into the
cache on first use): it starts them, has each know the other and
replicates the drill's namespace both ways (``link_geo_replication``). Its consumers on A
are created with ``replicate_subscription_state_enabled``, which is what turns on
Pulsar's subscription snapshots and mark-delete sync for them. Failures:

- ``kill``: SIGKILL of A's JVM (broker and bookie at once);
- ``cut-link``: the namespace's replication clusters set to the local one alone, on
  both, through Pulsar's admin; the drill waits until A's topic lists no replicator.

A failback (``--failback``) restores A: after ``kill`` A's standalone starts again on
its data and ports; after ``cut-link`` the namespace's replication clusters are A and B
again on both.

A copy on B names its origin in Pulsar's own property
``__MSG_PROP_REPL_SOURCE_POSITION`` (the position on A), which the drill reads as it
reads georep's origin properties.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from georep import limits
from georep.drill.admin_client import count_or_none
from georep.drill.errors import DrillError
from georep.drill.pulsar_tooling import require_pulsar_tools
from georep.drill.settings import CUT_LINK, KILL, ClusterUrls
from georep.drill.topology import A, AtFailure, B, Topology

if TYPE_CHECKING:
    from pulsar_tools.admin import PulsarAdmin
    from pulsar_tools.standalone import PulsarStandalone

log = logging.getLogger(__name__)


def pulsar_admin(url: str) -> PulsarAdmin:
    """Pulsar's admin REST at ``url`` (the tooling's client)."""
    from pulsar_tools.admin import PulsarAdmin

    return PulsarAdmin(url)


async def start_standalones(standalones: dict[str, PulsarStandalone], data_dir: Path) -> None:
    """Standalones A and B, each in ``data_dir / name``, started together and put into
    ``standalones`` first (so that a failed start still finds them to stop). Raises
    PulsarSetupError."""
    from pulsar_tools.standalone import PulsarStandalone, StandaloneSpec, resolve_jars

    lib = await asyncio.to_thread(resolve_jars, say=log.info)
    standalones.update(
        {name: PulsarStandalone(StandaloneSpec(name, data_dir / name), lib) for name in (A, B)}
    )
    await asyncio.gather(*(asyncio.to_thread(s.start) for s in standalones.values()))


class PulsarTopology(Topology):
    has_gateways = False

    def __init__(self, data_dir: Path, namespace: str) -> None:
        self.data_dir = data_dir
        self.tenant, _, self.namespace = namespace.partition("/")
        self.standalones: dict[str, PulsarStandalone] = {}
        self.urls: dict[str, ClusterUrls] = {}
        self._failed = False

    async def start(self) -> None:
        require_pulsar_tools("--mode pulsar")
        from pulsar_tools.admin import PulsarAdminError, link_geo_replication
        from pulsar_tools.standalone import PulsarSetupError

        try:
            await start_standalones(self.standalones, self.data_dir)
            await asyncio.to_thread(
                link_geo_replication, list(self.standalones.values()), self.tenant, self.namespace
            )
        except (PulsarSetupError, PulsarAdminError) as error:
            raise DrillError(f"real Pulsar: {error}") from None
        self.urls = {
            name: ClusterUrls(s.service_url, s.admin_url, None)
            for name, s in self.standalones.items()
        }

    def replication_missing(self, topic: str) -> list[str]:
        """What is not yet ready for ``topic``: Pulsar's replicator from A to B."""
        from pulsar_tools.admin import PulsarAdminError

        try:
            stats = pulsar_admin(self.urls[A].admin_url).stats(topic)
        except (PulsarAdminError, OSError) as error:
            return [f"A's stats of the topic ({error})"]
        replicator = (stats.get("replication") or {}).get(B) or {}
        return [] if replicator.get("connected") else ["Pulsar's connected replicator A->B"]

    def replication_backlog(self, topic: str) -> int | None:
        """Pulsar's ``replication.B.replicationBacklog`` in A's topic stats (entries its
        replicator to B has not sent yet, counted when asked); None when unknown."""
        return count_or_none(self._replicator(A, B, topic).get("replicationBacklog"))

    def return_backlog(self, topic: str) -> int | None:
        """The same from B to A, once that replicator is connected again (a failback
        waits for 0); None before."""
        replicator = self._replicator(B, A, topic)
        if not replicator.get("connected"):
            return None
        return count_or_none(replicator.get("replicationBacklog"))

    def _replicator(self, source: str, remote: str, topic: str) -> dict[str, Any]:
        """``replication.<remote>`` in ``source``'s topic stats ({} when unknown)."""
        from pulsar_tools.admin import PulsarAdminError

        try:
            stats = pulsar_admin(self.urls[source].admin_url).stats(topic)
        except (PulsarAdminError, OSError) as error:
            log.debug("%s's stats of %s: %s", source, topic, error)
            return {}
        replicator = (stats.get("replication") or {}).get(remote)
        return replicator if isinstance(replicator, dict) else {}

    async def restore(self, kind: str, topic: str) -> None:
        from pulsar_tools.admin import PulsarAdminError
        from pulsar_tools.standalone import PulsarSetupError

        try:
            if kind == KILL:
                await asyncio.to_thread(self.standalones[A].start)
            elif kind == CUT_LINK:
                for standalone in self.standalones.values():
                    await asyncio.to_thread(
                        pulsar_admin(standalone.admin_url).set_replication_clusters,
                        self.tenant,
                        self.namespace,
                        [A, B],
                    )
            else:
                raise DrillError(f"unknown failure {kind!r}")
        except (PulsarSetupError, PulsarAdminError) as error:
            raise DrillError(f"real Pulsar: A did not come back: {error}") from None
        self._failed = False

    async def fail(self, kind: str, topic: str, at_failure: AtFailure | None = None) -> None:
        if at_failure is not None:
            await at_failure()
        self._failed = True
        if kind == KILL:
            await asyncio.to_thread(self.standalones[A].kill)
        elif kind == CUT_LINK:
            await asyncio.to_thread(self._cut_link, topic)
        else:
            raise DrillError(f"unknown failure {kind!r}")

    def _cut_link(self, topic: str) -> None:
        for name, standalone in self.standalones.items():
            pulsar_admin(standalone.admin_url).set_replication_clusters(
                self.tenant, self.namespace, [name]
            )
        deadline = time.monotonic() + limits.drill_cut_link_wait_s_max
        while pulsar_admin(self.urls[A].admin_url).stats(topic).get("replication") or {}:
            if time.monotonic() > deadline:
                wait_s = limits.drill_cut_link_wait_s_max
                raise DrillError(f"A still replicates {topic} {wait_s:.0f} s after the cut")
            time.sleep(0.1)

    def unexpected_exits(self) -> list[str]:
        if self._failed:
            return []
        return [
            f"Pulsar standalone {name} exited with {s.process.returncode}; see {s.log_path}"
            for name, s in self.standalones.items()
            if s.process is not None and not s.running
        ]

    async def stop(self) -> None:
        await asyncio.gather(*(asyncio.to_thread(s.stop) for s in self.standalones.values()))
