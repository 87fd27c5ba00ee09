"""Test harness for the gateway: clusters and gateways as real processes.

- :class:`ClusterProcess` (from ``broker_cluster``) runs ``georep cluster``;
- :class:`GatewayProcess` writes a gateway TOML file and runs ``georep gateway``
  (waits for ``GATEWAY_READY``), and can be killed (SIGKILL) and started again on the
  same configuration and metadata;
- :func:`produce` publishes with the official pulsar-client (batched by default) and
  returns the payloads it got receipts for;
- :func:`read_entries` reads a topic's entries as stored, with the gateway's own link (a
  non-durable reader from the earliest entry, up to the last message the cluster's admin
  reports), so a test can see entry metadata — origin cluster and position — that a
  client hides for batched messages;
- :func:`payloads_on` reads the messages with pulsar-client, as an application would.

Every wait is bounded; nothing here asserts timing.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import pulsar
from prometheus_client.parser import text_string_to_metric_families

from georep.client.consumer import ReceivedEntry
from georep.client.link import PulsarLink
from georep.domain.position import Position
from georep.replicator.origin import origin_of
from georep.runtime.awaiting import within
from georep.wire import pulsar_wire_pb2 as pb
from tests.harness.broker_cluster import ChildProcess, ClusterProcess, free_port, open_client
from tests.harness.waiting import wait_for

if TYPE_CHECKING:
    from pulsar_tools.standalone import PulsarStandalone

__all__ = ["ClusterProcess", "GatewayProcess", "free_port"]

#: How long a reader, once it has read up to the topic's last message, waits for one
#: more entry before it decides the topic is read.
QUIET_S = 1.5
#: How long a reader may take to reach the topic's last message before it fails.
READ_TIMEOUT_S = 120.0


# --- clusters ---------------------------------------------------------------------------
def admin_url(cluster: ClusterProcess) -> str:
    return f"http://127.0.0.1:{cluster.admin_port}"


def endpoint_urls(cluster: Any) -> tuple[str, str]:
    """(service URL, admin URL) of a georep ClusterProcess or a real Pulsar standalone."""
    if hasattr(cluster, "service_url"):
        return cluster.service_url, cluster.admin_url
    return cluster.url, admin_url(cluster)


def http(method: str, url: str, body: Any = None, token: str | None = None) -> tuple[int, Any]:
    """(status, parsed JSON or text) of one HTTP request; never raises on a status."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None or method != "GET":
        request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=15) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode()
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, text


def create_namespace(cluster: ClusterProcess, namespace: str) -> None:
    tenant, _, _name = namespace.partition("/")
    base = admin_url(cluster)
    http("PUT", f"{base}/admin/v2/tenants/{tenant}", {"allowedClusters": [cluster.name]})
    status, text = http("PUT", f"{base}/admin/v2/namespaces/{namespace}")
    assert status in (204, 409), text


def create_partitioned_topic(cluster: ClusterProcess, topic: str, partitions: int) -> None:
    path = topic.removeprefix("persistent://")
    status, text = http(
        "PUT", f"{admin_url(cluster)}/admin/v2/persistent/{path}/partitions", partitions
    )
    assert status == 204, text


# --- gateways ---------------------------------------------------------------------------
class GatewayProcess(ChildProcess):
    """``georep gateway`` as a child process, restartable on the same config and store."""

    def __init__(
        self,
        directory: Path,
        *,
        local: ClusterProcess | PulsarStandalone,  # real Pulsar with kind = "pulsar"
        remotes: Iterable[Any],  # georep clusters or real Pulsar (endpoint_urls)
        policies: dict[str, list[str]] | None = None,
        token: str | None = None,
        extra_toml: str = "",
        kind: str = "georep",
        metadata: Path | None = None,
        instance: str | None = None,
        cluster_keys: dict[str, str] | None = None,
        remote_keys: dict[str, dict[str, Any]] | None = None,
        gateway_keys: dict[str, Any] | None = None,
    ) -> None:
        """``kind = "pulsar"``: every cluster is a real Pulsar standalone. ``metadata``
        (a SQLite file) and ``instance`` make this one of several instances of the gateway
        of ``local`` (gateway/ownership.py): they share the file. ``cluster_keys`` go into
        every cluster's table (``tls_trust_certs_file``, ``token_file``, ...);
        ``remote_keys`` into one remote's (``listener_name``, ``keepalive_interval_s``);
        ``gateway_keys`` into ``[gateway]`` (``stuck_after_s``)."""
        keys = [f"{key} = {json.dumps(value)}" for key, value in (cluster_keys or {}).items()]
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.local = local
        self.port = free_port()
        self.token = token
        #: More environment for the process (GEOREP_ADMIN_TOKENS, say).
        self.env: dict[str, str] = {}
        self.config_path = directory / f"gateway-{local.name}.toml"
        self.log_path = directory / f"gateway-{local.name}.log"
        self.process: subprocess.Popen | None = None
        self.instance = instance
        metadata = metadata or directory / f"gateway-{local.name}.db"
        lines = [
            "[gateway]",
            f'listen = "127.0.0.1:{self.port}"',
            f'metadata = "sqlite:///{metadata}"',
            "discovery_interval_s = 0.5",
            "retry_backoff_s_max = 2.0",
            *([f'instance = "{instance}"'] if instance else []),
            *(f"{key} = {json.dumps(value)}" for key, value in (gateway_keys or {}).items()),
            "",
            "[local]",
            f'name = "{local.name}"',
            f'kind = "{kind}"',
            'service_url = "{}"\nadmin_url = "{}"'.format(*endpoint_urls(local)),
            *keys,
        ]
        for remote in remotes:
            lines += [
                "",
                f"[remotes.{remote.name}]",
                f'kind = "{kind}"',
                'service_url = "{}"\nadmin_url = "{}"'.format(*endpoint_urls(remote)),
                *keys,
                *(
                    f"{key} = {json.dumps(value)}"
                    for key, value in (remote_keys or {}).get(remote.name, {}).items()
                ),
            ]
        if policies:
            lines += ["", "[policies.namespaces]"]
            lines += [f'"{ns}" = {json.dumps(clusters)}' for ns, clusters in policies.items()]
        self.config_path.write_text("\n".join(lines) + "\n" + extra_toml)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60) -> str:
        env = {"GEOREP_GATEWAY_TOKENS": self.token} if self.token else {}
        env.update(self.env)
        args = [sys.executable, "-m", "georep", "gateway", "--config", str(self.config_path)]
        return self._spawn(args, "GATEWAY_READY", timeout_s, env)

    # -- REST --

    def get(self, path: str) -> Any:
        status, document = http("GET", f"{self.url}{path}", token=self.token)
        assert status == 200, (status, document)
        return document

    def put_namespace_policy(self, namespace: str, clusters: list[str]) -> Any:
        status, document = http(
            "PUT",
            f"{self.url}/admin/georep/v1/namespaces/{namespace}/replication",
            {"clusters": clusters},
            token=self.token,
        )
        assert status == 200, (status, document)
        return document

    def replicators(self, topic_prefix: str = "") -> list[dict]:
        stats = self.get("/admin/georep/v1/stats")
        return [r for r in stats["replicators"] if r["topic"].startswith(topic_prefix)]


def metric(gateway: GatewayProcess, name: str, **labels: str) -> float | None:
    """The value of one sample of the gateway's ``/metrics`` (None: not exported)."""
    status, text = http("GET", f"{gateway.url}/metrics")
    assert status == 200, status
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return None


def stuck_to(gateway: GatewayProcess, remote: str) -> str | None:
    """The gateway's ``/health`` problem saying its replication to ``remote`` is stuck
    (the watchdog: ``[gateway] stuck_after_s``), else None."""
    problems = gateway.get("/health").get("problems", [])
    stuck = f"replication to {remote}: "
    return next((p for p in problems if p.startswith(stuck) and "moved nothing on" in p), None)


def when_the_link_closed_on_keepalive(gateway: GatewayProcess, topic: str) -> str | None:
    """Once the link of ``topic``'s replicator to the remote was closed by the keep-alive
    (a PING unanswered: a black-holed link): the replicator's error while it is not
    connected, or else the gateway's log line saying so; None before (``wait_for`` polls
    it). The log counts even when the replicator is connected again: its error says
    the latest cause only (a retry that fails in turn replaces it) and a slow poll may
    miss the moment it was down; whether a connection then went around the link is for
    the caller to check, by what reached the remote."""
    (replicator,) = gateway.replicators(topic)
    error = replicator["lastError"] or ""
    if "keep-alive" in error and not replicator["connected"]:
        return str(error)
    said = [line for line in _log_lines(gateway) if "closed: keep-alive" in line]
    return said[-1] if said else None


def keepalive_close(gateway: GatewayProcess, topic: str, timeout_s: float = 120) -> str:
    """Waits for :func:`when_the_link_closed_on_keepalive`; past ``timeout_s`` fails with
    what the replicator and the gateway's log said instead."""
    try:
        found: str = wait_for(lambda: when_the_link_closed_on_keepalive(gateway, topic), timeout_s)
    except TimeoutError:
        said = [line for line in _log_lines(gateway) if " DEBUG " not in line][-15:]
        raise AssertionError(
            f"no keep-alive close within {timeout_s} s; replicators:"
            f" {gateway.replicators(topic)}; the gateway's log ends:\n" + "\n".join(said)
        ) from None
    return found


def _log_lines(gateway: GatewayProcess) -> list[str]:
    try:
        return gateway.log_path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def ownership_agreed(instances: Iterable[GatewayProcess]) -> bool:
    """Every live instance sees the same live membership, every member has stopped down
    to it (its view), and none waits for a partition another still runs. Until then a
    partition count that looks right may be a handover half done: the joining instance
    owns its share, the others have let it go, and it has not started it yet."""
    alive = [i for i in instances if i.process is not None and i.process.poll() is None]
    names = sorted(str(i.instance) for i in alive)
    for instance in alive:
        document = instance.get("/admin/georep/v1/ownership")
        members = document["members"]
        if sorted(m["instance"] for m in members) != names:
            return False
        if any(sorted(m["view"]) != names for m in members):
            return False
        if document["partitions"]["pending"]:
            return False
    return True


# --- topologies ---------------------------------------------------------------------------
class World:
    """Clusters and a gateway beside each, as processes: one test module's topology.
    ``self.a``, ``self.b``, ... are the clusters by lower-cased name."""

    #: Set in ``__init__`` for the clusters named A, B, C (absent for a name not given).
    a: ClusterProcess
    b: ClusterProcess
    c: ClusterProcess

    def __init__(self, root: Path, names: Iterable[str] = ("A", "B", "C")) -> None:
        self.root = root
        self.clusters = {name: ClusterProcess(root / name.lower(), name=name) for name in names}
        for name, cluster in self.clusters.items():
            setattr(self, name.lower(), cluster)
        self.gateways: dict[str, GatewayProcess] = {}

    def start(self, namespaces: Iterable[str], gateways: dict[str, dict[str, Any]]) -> Self:
        """Start every cluster with ``namespaces``, then a gateway per entry of
        ``gateways`` (cluster name -> GatewayProcess keyword arguments besides local)."""
        for cluster in self.clusters.values():
            cluster.start()
            for namespace in namespaces:
                create_namespace(cluster, namespace)
        for name, options in gateways.items():
            self.gateways[name] = GatewayProcess(
                self.root / f"gw-{name.lower()}", local=self.clusters[name], **options
            )
        for gateway in self.gateways.values():
            gateway.start()
        return self

    def stop(self) -> None:
        for process in [*self.gateways.values(), *self.clusters.values()]:
            process.kill()


# --- producing and reading ----------------------------------------------------------------
def produce(
    url: str,
    topic: str,
    count: int,
    prefix: str,
    *,
    batching: bool = True,
    start: int = 0,
    properties: dict[str, str] | None = None,
    stop: threading.Event | None = None,
) -> list[bytes]:
    """Publish ``prefix-<i>`` for i in start..start+count-1 with pulsar-client; returns
    the payloads the broker acknowledged (all of them unless ``stop`` is set)."""
    sent: list[bytes] = []
    lock = threading.Lock()
    failures: list[Any] = []

    def done(result, _message_id, payload: bytes) -> None:
        if result == pulsar.Result.Ok:
            with lock:
                sent.append(payload)
        else:
            failures.append(result)

    with open_client(url) as client:
        producer = client.create_producer(
            topic,
            batching_enabled=batching,
            batching_max_publish_delay_ms=5,
            block_if_queue_full=True,
            send_timeout_millis=30_000,
        )
        for i in range(start, start + count):
            if stop is not None and stop.is_set():
                break
            payload = f"{prefix}-{i}".encode()
            producer.send_async(
                payload,
                lambda result, message_id, p=payload: done(result, message_id, p),
                properties=properties or {},
                partition_key=f"key-{i % 7}",
                event_timestamp=1_700_000_000_000 + i,
            )
        producer.flush()
        producer.close()
    assert not failures, failures[:3]
    return sent


def last_message_position(cluster: ClusterProcess, topic: str) -> Position | None:
    """Where ``topic``'s last message is, as the cluster's admin says (``lastMessageId``:
    the last confirmed entry, markers at the end stepped over, as a reader is never
    dispatched those); None if the topic holds none."""
    path = topic.removeprefix("persistent://")
    status, document = http("GET", f"{admin_url(cluster)}/admin/v2/persistent/{path}/lastMessageId")
    assert status == 200, f"last message id of {topic}: {status} {document}"
    ledger_id, entry_id = int(document["ledgerId"]), int(document["entryId"])
    return None if entry_id < 0 else Position(ledger_id, entry_id)


async def _read_entries(
    cluster: ClusterProcess, topic: str, quiet_s: float, timeout_s: float
) -> list[ReceivedEntry]:
    deadline = time.monotonic() + timeout_s
    link = PulsarLink(cluster.url)
    try:
        consumer = await link.subscribe(
            topic, f"check-{time.monotonic_ns()}", durable=False, initial_position=1
        )
        # asked once the reader exists: every entry up to here is the reader's to receive
        end = await asyncio.to_thread(last_message_position, cluster, topic)
        entries: list[ReceivedEntry] = []
        furthest: Position | None = None
        while True:
            reached = end is None or (furthest is not None and furthest >= end)
            left = deadline - time.monotonic()
            if not reached and left <= 0:
                raise TimeoutError(
                    f"read of {topic} on {cluster.name} did not reach its last message {end}"
                    f" within {timeout_s} s: {len(entries)} entries read, up to {furthest}"
                )
            try:
                entry = await within(consumer.receive(), quiet_s if reached else left)
            except TimeoutError:
                if reached:
                    return entries
                continue  # the deadline has passed: the check above fails the read
            furthest = entry.position if furthest is None else max(furthest, entry.position)
            entries.append(entry)
            # the broker stops dispatching past consumer_unacked_messages_max unacked
            consumer.ack_cumulative(entry.position)
    finally:
        await link.close()


def read_entries(
    cluster: ClusterProcess,
    topic: str,
    quiet_s: float = QUIET_S,
    timeout_s: float = READ_TIMEOUT_S,
) -> list[ReceivedEntry]:
    """Every entry of ``topic`` on ``cluster`` as stored (markers aside, which only the
    gateway's subscriptions are dispatched): all of them up to the topic's last message
    when the read starts (ending on a quiet period alone cut reads short on a loaded
    machine), then whatever arrives until none has for ``quiet_s``. Fails if the last
    message has not arrived within ``timeout_s``."""
    return asyncio.run(_read_entries(cluster, topic, quiet_s, timeout_s))


def origin_counts(entries: Iterable[ReceivedEntry]) -> collections.Counter:
    """origin position -> copies, for the replicated entries among ``entries``."""
    counts: collections.Counter = collections.Counter()
    for entry in entries:
        origin = origin_of(entry.metadata)
        if origin is not None:
            counts[(origin.cluster, origin.position)] += 1
    return counts


def local_positions(entries: Iterable[ReceivedEntry], cluster: str) -> set:
    """(cluster, position) of the entries that originated on ``cluster`` itself."""
    return {
        (cluster, entry.position)
        for entry in entries
        if not entry.metadata.replicated_from and not entry.metadata.HasField("marker_type")
    }


def payloads_on(url: str, topic: str, quiet_ms: int = 1500) -> collections.Counter:
    """payload -> times a pulsar-client reader from the earliest message sees it: every
    message the topic holds when read (``has_message_available`` asks the broker for its
    last message), then whatever arrives until ``quiet_ms`` pass without one. Ending on
    the quiet period alone cut reads short on a loaded machine, and counted messages that
    were there as lost."""
    seen: collections.Counter = collections.Counter()
    with open_client(url) as client:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        while reader.has_message_available():
            seen[reader.read_next(timeout_millis=60_000).data()] += 1
        with contextlib.suppress(pulsar.Timeout):
            while True:
                seen[reader.read_next(timeout_millis=quiet_ms).data()] += 1
        reader.close()
    return seen


def metadata_of(entries: Iterable[ReceivedEntry]) -> list[pb.MessageMetadata]:
    return [entry.metadata for entry in entries]
