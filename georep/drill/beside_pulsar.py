"""Clusters A and B as real Apache Pulsar standalones with a georep gateway beside each:
the deployment "replicate and sync" (docs/SUBSYNC.md, "Beside real Pulsar"), for
``georep drill --beside-pulsar``.

The drill starts both standalones as ``--mode pulsar`` does (pulsar_topology.py; the
tooling, ``pulsar_tools``, imported where used: ``pulsar_tooling.py``), but
Pulsar's own geo-replication stays off: each standalone only gets the drill's namespace,
with Pulsar's deduplication on (the gateway's replicator needs it: a restarted
replicator must not write a copy twice). Then a ``georep gateway`` child process beside
each, its TOML written into its own directory under the data directory: ``kind =
"pulsar"`` for the local cluster and the remote, ``[policies.namespaces]`` replicating
the namespace to the other cluster, ``[subscription_sync]`` as the drill passes it
(``full`` mode: a gateway beside Pulsar refuses ``pulsar-compatible``, which there is
Pulsar's own replicated subscriptions), ``discovery_interval_s =
limits.drill_discovery_interval_s``. A gateway listens on port 0 at its first start and
on the port its ready line named at every later one. The processes run unsupervised, as
ManagedTopology's do: a crash must show. Failures, as ManagedTopology's:

- ``kill``: SIGKILL of A's standalone (broker and bookie); then, once ``at_failure`` has
  read A's gateway, SIGKILL of A's gateway;
- ``cut-link``: SIGKILL of both gateways; A keeps running, cut off.

A failback restores A: after ``kill`` A's standalone starts again on its data and ports,
then A's gateway on its metadata and port; after ``cut-link`` both gateways start again.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from georep import limits
from georep.drill.errors import DrillError
from georep.drill.pulsar_tooling import require_pulsar_tools
from georep.drill.pulsar_topology import pulsar_admin, start_standalones
from georep.drill.settings import CUT_LINK, KILL, ClusterUrls
from georep.drill.topology import A, AtFailure, B, Topology, fail_beside_gateways, start_all
from georep.runtime.processes import ManagedProcess, ProcessFailed, georep_command
from georep.up.supervisor import ReadyLineError, gateway_port

if TYPE_CHECKING:
    from pulsar_tools.standalone import PulsarStandalone

_OTHER = {A: B, B: A}


class BesidePulsarTopology(Topology):
    def __init__(self, data_dir: Path, namespace: str, subscription_sync: dict[str, Any]) -> None:
        self.data_dir = data_dir
        self.namespace = namespace
        self.subscription_sync = subscription_sync
        self.standalones: dict[str, PulsarStandalone] = {}
        self.gateways: dict[str, ManagedProcess] = {}
        #: Each gateway's port: 0 until its first ready line named one.
        self.gateway_ports = {A: 0, B: 0}
        self.urls = {}

    async def start(self) -> None:
        require_pulsar_tools("--beside-pulsar")
        from pulsar_tools.admin import PulsarAdminError
        from pulsar_tools.standalone import PulsarSetupError, pulsar_version

        self.beside_pulsar = pulsar_version()
        try:
            await start_standalones(self.standalones, self.data_dir)
            await asyncio.gather(
                *(
                    asyncio.to_thread(replicated_by_gateways, s.admin_url, s.name, self.namespace)
                    for s in self.standalones.values()
                )
            )
        except (PulsarSetupError, PulsarAdminError) as error:
            raise DrillError(f"real Pulsar: {error}") from None
        await self._start_gateways(A, B)
        self.urls = {
            name: ClusterUrls(
                s.service_url, s.admin_url, f"http://127.0.0.1:{self.gateway_ports[name]}"
            )
            for name, s in self.standalones.items()
        }

    async def _start_gateways(self, *names: str) -> None:
        for name in names:
            home = self.data_dir / f"gateway-{name}"
            home.mkdir(parents=True, exist_ok=True)
            config = home / "gateway.toml"
            config.write_text(self._gateway_toml(name, home))
            self.gateways[name] = ManagedProcess(
                georep_command("gateway", "--config", str(config)),
                "GATEWAY_READY",
                log_path=home / "gateway.log",
            )
        try:
            await start_all(self.gateways[name] for name in names)
            for name in names:
                self.gateway_ports[name] = gateway_port(self.gateways[name].detail)
        except (ProcessFailed, ReadyLineError) as error:
            raise DrillError(f"a gateway beside Pulsar: {error}") from None

    def _gateway_toml(self, name: str, home: Path) -> str:
        """Gateway ``name``'s file: beside its standalone, replicating the namespace to the
        other one and syncing its subscriptions (``subscription_sync``: scalars)."""
        local, remote = self.standalones[name], self.standalones[_OTHER[name]]
        lines = [
            "# written by georep drill --beside-pulsar",
            "[gateway]",
            f'listen = "127.0.0.1:{self.gateway_ports[name]}"',
            f"metadata = {json.dumps('sqlite:///' + str(home / 'gateway.db'))}",
            f"discovery_interval_s = {limits.drill_discovery_interval_s!r}",
        ]
        lines += ["", "[local]", f"name = {json.dumps(name)}", *_cluster_keys(local)]
        lines += ["", f"[remotes.{remote.name}]", *_cluster_keys(remote)]
        lines += ["", "[policies.namespaces]"]
        lines += [f"{json.dumps(self.namespace)} = {json.dumps([remote.name])}"]
        lines += ["", "[subscription_sync]"]
        lines += [f"{key} = {json.dumps(value)}" for key, value in self.subscription_sync.items()]
        return "\n".join(lines) + "\n"

    async def fail(self, kind: str, topic: str, at_failure: AtFailure | None = None) -> None:
        async def kill_cluster_a() -> None:
            await asyncio.to_thread(self.standalones[A].kill)

        await fail_beside_gateways(kind, self.gateways, kill_cluster_a, at_failure)

    async def restore(self, kind: str, topic: str) -> None:
        from pulsar_tools.standalone import PulsarSetupError

        if kind == KILL:
            try:
                await asyncio.to_thread(self.standalones[A].start)
            except PulsarSetupError as error:
                raise DrillError(f"real Pulsar: A did not come back: {error}") from None
            await self._start_gateways(A)
        elif kind == CUT_LINK:
            await self._start_gateways(A, B)
        else:
            raise DrillError(f"unknown failure {kind!r}")

    def unexpected_exits(self) -> list[str]:
        exits = [
            f"Pulsar standalone {name} exited with {s.process.returncode}; see {s.log_path}"
            for name, s in self.standalones.items()
            if s.process is not None and not s.running
        ]
        return exits + [
            f"gateway {name} exited with {p.returncode}; see {p.log_path}"
            for name, p in self.gateways.items()
            if p.process is not None and not p.running
        ]

    async def stop(self) -> None:
        await asyncio.gather(
            *(p.terminate(limits.up_stop_grace_s) for p in self.gateways.values()),
            return_exceptions=True,
        )
        await asyncio.gather(*(asyncio.to_thread(s.stop) for s in self.standalones.values()))


def _cluster_keys(standalone: PulsarStandalone) -> list[str]:
    return [
        'kind = "pulsar"',
        f"service_url = {json.dumps(standalone.service_url)}",
        f"admin_url = {json.dumps(standalone.admin_url)}",
    ]


def replicated_by_gateways(admin_url: str, cluster: str, namespace: str) -> None:
    """``namespace`` on a standalone, for the gateways to replicate: its tenant allowed
    there, Pulsar's deduplication on, and no Pulsar replication clusters."""
    tenant, _, name = namespace.partition("/")
    admin = pulsar_admin(admin_url)
    admin.ensure_tenant(tenant, [cluster])
    admin.ensure_namespace(tenant, name)
    admin.request("POST", f"/admin/v2/namespaces/{namespace}/deduplication", True)
