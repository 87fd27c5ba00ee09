"""A real Apache Pulsar cluster of several brokers, from the same Maven jars, on loopback.

What a production cluster is, in the fewest processes that still show it: a metadata
store several processes share, one bookie, and brokers that own namespace bundles one
at a time and hand them over on an unload, a split or a restart::

    ZooKeeper (ZooKeeperServerMain)   one store: the cluster's metadata, the
        ^   ^   ^                     configuration store and BookKeeper's /ledgers
        |   |   +-- bookie (org.apache.bookkeeper.server.Main), E = Qw = Qa = 1
        |   +------ broker 0 (PulsarBrokerStarter)  pulsar://127.0.0.1:<p0>  http://...:<w0>
        +---------- broker 1 (PulsarBrokerStarter)  pulsar://127.0.0.1:<p1>  http://...:<w1>

Start order, each step waiting for the last: ZooKeeper serves its client port; the
metadata is written once by ``PulsarClusterMetadataSetup`` (the cluster, ``public/default``,
BookKeeper's ledger root; stream storage off); the bookie serves its port; the brokers
start together and are ready when their admin REST says so (``/admin/v2/brokers/ready``)
and the cluster's active brokers include them. Every port is picked free on 127.0.0.1
and kept: a broker stopped by :meth:`PulsarCluster.stop_broker` starts again on its own
ports (a rolling restart), so the cluster's service URL stays valid.

The JVM options, the jars (:func:`~pulsar_tools.standalone.resolve_jars`) and the log4j2
file are the standalone's (``standalone.py``); each process logs to ``<dir>/pulsar.log``
and writes its console to ``<dir>/jvm.out``. Brokers take only what the test directs:
the load manager neither sheds nor splits bundles on its own (``loadBalancerSheddingEnabled``
and ``loadBalancerAutoBundleSplitEnabled`` off), so every move is one the caller made.

Worked example (``tools/pulsar_cluster.py --name A``)::

    cluster = PulsarCluster(ClusterSpec("A", Path("/tmp/a")), resolve_jars())
    cluster.start()                       # about 30 s on two loaded cores
    cluster.stop_broker(0); cluster.start_broker(0)   # SIGTERM, then the same ports
    cluster.stop()
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pulsar_tools.standalone import (
    BROKER_SETTINGS_BOTH_LINES,
    EXTRA_OPTS_ENV,
    JVM_OPTIONS,
    LOG4J2_TEMPLATE,
    PULSAR_VERSION,
    PulsarSetupError,
    free_port,
    get_json,
    resolve_jars,
)

ZOOKEEPER_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
METADATA_SETUP_CLASS = "org.apache.pulsar.PulsarClusterMetadataSetup"
BOOKIE_CLASS = "org.apache.bookkeeper.server.Main"
BROKER_CLASS = "org.apache.pulsar.PulsarBrokerStarter"
LOOPBACK = "127.0.0.1"


@dataclass
class BrokerPorts:
    broker_port: int = 0
    web_port: int = 0

    def __post_init__(self) -> None:
        self.broker_port = self.broker_port or free_port()
        self.web_port = self.web_port or free_port()

    @property
    def service_url(self) -> str:
        return f"pulsar://{LOOPBACK}:{self.broker_port}"

    @property
    def admin_url(self) -> str:
        return f"http://{LOOPBACK}:{self.web_port}"

    @property
    def broker_id(self) -> str:
        """How the cluster names the broker (lookups, ownership): its web address."""
        return f"{LOOPBACK}:{self.web_port}"


@dataclass
class ClusterSpec:
    """A cluster's name, data directory, brokers (their ports; 0 picks free ones) and
    heap per JVM. ``settings`` are broker settings written after ours (so they win)."""

    name: str
    data_dir: Path
    brokers: int = 2
    zookeeper_port: int = 0
    bookie_port: int = 0
    heap_mb: int = 320
    #: Bundles a new namespace gets: more bundles, more spread over the brokers.
    namespace_bundles: int = 8
    settings: Mapping[str, str] = field(default_factory=dict)
    broker_ports: list[BrokerPorts] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir).resolve()
        self.zookeeper_port = self.zookeeper_port or free_port()
        self.bookie_port = self.bookie_port or free_port()
        while len(self.broker_ports) < self.brokers:
            self.broker_ports.append(BrokerPorts())


def _port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), timeout=1):
        return True
    return False


class JavaProcess:
    """One JVM of the cluster: its command, directory and the check that says it serves."""

    def __init__(
        self,
        name: str,
        directory: Path,
        main_class: str,
        arguments: Sequence[str],
        *,
        lib_dir: Path,
        heap_mb: int,
        ready: Callable[[], bool],
    ) -> None:
        self.name = name
        self.directory = directory
        self.main_class = main_class
        self.arguments = list(arguments)
        self.lib_dir = lib_dir
        self.heap_mb = heap_mb
        self.ready = ready
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = directory / "pulsar.log"
        self.stdout_path = directory / "jvm.out"
        self.start_seconds = 0.0

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self) -> list[str]:
        return [
            "java",
            f"-Xms{min(128, self.heap_mb)}m",
            f"-Xmx{self.heap_mb}m",
            f"-XX:MaxDirectMemorySize={self.heap_mb}m",
            *JVM_OPTIONS,
            *shlex.split(os.environ.get(EXTRA_OPTS_ENV, "")),
            f"-Dlog4j.configurationFile={self.directory / 'log4j2.xml'}",
            "-cp",
            f"{self.lib_dir}/*",
            self.main_class,
            *self.arguments,
        ]

    def launch(self) -> None:
        if self.running:
            raise PulsarSetupError(f"{self.name} is already running")
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "log4j2.xml").write_text(LOG4J2_TEMPLATE.format(log=self.log_path))
        self._started = time.monotonic()
        with open(self.stdout_path, "ab") as out:
            self.process = subprocess.Popen(
                self.command(), cwd=self.directory, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip

    def wait_ready(self, timeout_s: float) -> None:
        deadline = self._started + timeout_s
        while not self.ready():
            if not self.running:
                code = self.process.returncode if self.process is not None else None
                raise PulsarSetupError(
                    f"{self.name} exited with {code} before serving;"
                    f" see {self.log_path} and {self.stdout_path}"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise PulsarSetupError(f"{self.name} did not serve in time; see {self.log_path}")
            time.sleep(0.25)
        self.start_seconds = time.monotonic() - self._started

    def run_to_end(self, timeout_s: float) -> None:
        """For a command rather than a server: launch it and wait for exit 0."""
        self.launch()
        assert self.process is not None
        try:
            code = self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            code = -1
        if code != 0:
            raise PulsarSetupError(f"{self.name} failed (exit {code}); see {self.log_path}")

    def kill(self) -> None:
        if self.process is not None and self.running:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, as a supervisor stops a broker; SIGKILL after ``timeout_s``."""
        if self.process is None:
            return 0
        if self.running:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.wait()


def _write_properties(path: Path, settings: Mapping[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))


class PulsarCluster:
    """ZooKeeper, one bookie and ``spec.brokers`` brokers. ``start`` returns once every
    broker serves; ``stop`` ends them all (brokers first)."""

    def __init__(self, spec: ClusterSpec, lib_dir: Path) -> None:
        self.spec = spec
        self.lib_dir = lib_dir
        data = spec.data_dir
        self.zookeeper = self._jvm(
            "zookeeper", ZOOKEEPER_CLASS, [str(data / "zookeeper" / "zoo.cfg")], 128,
            lambda: _port_open(spec.zookeeper_port),
        )  # fmt: skip
        self.bookie = self._jvm(
            "bookie", BOOKIE_CLASS, ["--conf", str(data / "bookie" / "bookkeeper.conf")],
            spec.heap_mb, lambda: _port_open(spec.bookie_port),
        )  # fmt: skip
        self.brokers = [
            self._broker_jvm(index, ports) for index, ports in enumerate(spec.broker_ports)
        ]

    def _broker_jvm(self, index: int, ports: BrokerPorts) -> JavaProcess:
        conf = self.spec.data_dir / f"broker-{index}" / "broker.conf"
        return self._jvm(
            f"broker-{index}", BROKER_CLASS, ["--broker-conf", str(conf)], self.spec.heap_mb,
            lambda: self._broker_serves(ports),
        )  # fmt: skip

    def _jvm(
        self, name: str, main: str, args: list[str], heap_mb: int, ready: Callable[[], bool]
    ) -> JavaProcess:
        return JavaProcess(
            f"{self.spec.name}/{name}", self.spec.data_dir / name, main, args,
            lib_dir=self.lib_dir, heap_mb=heap_mb, ready=ready,
        )  # fmt: skip

    # -- what callers connect to --

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def service_url(self) -> str:
        """Broker 0's URL: any broker answers a lookup, and names the owner."""
        return self.spec.broker_ports[0].service_url

    @property
    def service_urls(self) -> str:
        """Every broker, in the multi-host form Pulsar's own clients take."""
        hosts = ",".join(f"{LOOPBACK}:{p.broker_port}" for p in self.spec.broker_ports)
        return f"pulsar://{hosts}"

    @property
    def admin_url(self) -> str:
        return self.spec.broker_ports[0].admin_url

    @property
    def metadata_url(self) -> str:
        return f"zk:{LOOPBACK}:{self.spec.zookeeper_port}"

    @property
    def running(self) -> bool:
        return all(jvm.running for jvm in (self.zookeeper, self.bookie, *self.brokers))

    # -- configuration --

    def zookeeper_settings(self) -> dict[str, str]:
        return {
            "tickTime": "2000",
            "dataDir": str(self.zookeeper.directory / "data"),
            "clientPort": str(self.spec.zookeeper_port),
            "clientPortAddress": LOOPBACK,
            # The AdminServer would listen on 8080 of every interface.
            "admin.enableServer": "false",
            "maxClientCnxns": "0",
        }

    def bookie_settings(self) -> dict[str, str]:
        directory = self.bookie.directory
        return {
            "bookiePort": str(self.spec.bookie_port),
            "advertisedAddress": LOOPBACK,
            "listeningInterface": "lo",
            "allowLoopback": "true",
            "metadataServiceUri": f"zk+null://{LOOPBACK}:{self.spec.zookeeper_port}/ledgers",
            "journalDirectories": str(directory / "journal"),
            "ledgerDirectories": str(directory / "ledgers"),
            # fsync on, as the standalones' and the embedded cluster's bookies.
            "journalSyncData": "true",
            "httpServerEnabled": "false",
            "diskUsageThreshold": "0.99",
            "diskUsageWarnThreshold": "0.98",
        }

    def broker_settings(self, ports: BrokerPorts) -> dict[str, str]:
        return {
            "clusterName": self.name,
            "metadataStoreUrl": self.metadata_url,
            "configurationMetadataStoreUrl": self.metadata_url,
            "advertisedAddress": LOOPBACK,
            "bindAddress": LOOPBACK,
            "brokerServicePort": str(ports.broker_port),
            "webServicePort": str(ports.web_port),
            "managedLedgerDefaultEnsembleSize": "1",
            "managedLedgerDefaultWriteQuorum": "1",
            "managedLedgerDefaultAckQuorum": "1",
            "defaultNumberOfNamespaceBundles": str(self.spec.namespace_bundles),
            "enableReplicatedSubscriptions": "true",
            "allowAutoTopicCreationType": "non-partitioned",
            "brokerDeleteInactiveTopicsEnabled": "false",
            "transactionCoordinatorEnabled": "false",
            "functionsWorkerEnabled": "false",
            # Bundles move only when the caller moves them.
            "loadBalancerSheddingEnabled": "false",
            "loadBalancerAutoBundleSplitEnabled": "false",
            "loadBalancerAutoUnloadSplitBundlesEnabled": "false",
            "brokerShutdownTimeoutMs": "10000",
            **BROKER_SETTINGS_BOTH_LINES,  # 3.0 starts only with them
            **self.spec.settings,
        }

    def write_configuration(self) -> None:
        _write_properties(self.zookeeper.directory / "zoo.cfg", self.zookeeper_settings())
        _write_properties(self.bookie.directory / "bookkeeper.conf", self.bookie_settings())
        for broker, ports in zip(self.brokers, self.spec.broker_ports, strict=True):
            _write_properties(broker.directory / "broker.conf", self.broker_settings(ports))

    # -- life cycle --

    def start(self, timeout_s: float = 240.0) -> None:
        """ZooKeeper, the metadata (once), the bookie, then every broker."""
        self.write_configuration()
        try:
            self.zookeeper.launch()
            self.zookeeper.wait_ready(timeout_s)
            if not (self.spec.data_dir / "metadata-initialised").exists():
                self._setup_metadata(timeout_s)
            self.bookie.launch()
            self.bookie.wait_ready(timeout_s)
            for broker in self.brokers:
                broker.launch()
            for broker in self.brokers:
                broker.wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise

    def _setup_metadata(self, timeout_s: float) -> None:
        first = self.spec.broker_ports[0]
        setup = self._jvm(
            "metadata-setup", METADATA_SETUP_CLASS,
            [
                "--cluster", self.name,
                "--metadata-store", self.metadata_url,
                "--configuration-metadata-store", self.metadata_url,
                "--web-service-url", first.admin_url,
                "--broker-service-url", first.service_url,
                "--initial-num-stream-storage-containers", "0",
                "--default-namespace-bundle-number", str(self.spec.namespace_bundles),
            ],
            128, lambda: True,
        )  # fmt: skip
        setup.run_to_end(timeout_s)
        (self.spec.data_dir / "metadata-initialised").write_text("done\n")

    def _broker_serves(self, ports: BrokerPorts) -> bool:
        """Its admin REST is up and the cluster counts it among its active brokers (a
        lookup may then give it bundles)."""
        try:
            active = get_json(f"{ports.admin_url}/admin/v2/brokers/{self.name}")
        except (OSError, ValueError):
            return False
        return ports.broker_id in active

    def stop_broker(self, index: int, timeout_s: float = 60.0) -> int:
        """SIGTERM broker ``index`` and wait: it unloads its bundles as it goes."""
        return self.brokers[index].stop(timeout_s)

    def start_broker(self, index: int, timeout_s: float = 180.0) -> None:
        """Start broker ``index`` again, on its own ports, and wait until it serves."""
        broker = self.brokers[index]
        broker.launch()
        broker.wait_ready(timeout_s)

    def stop(self) -> None:
        for broker in self.brokers:
            broker.stop()
        self.bookie.stop()
        self.zookeeper.stop()

    def __enter__(self) -> PulsarCluster:
        self.start()
        return self

    def __exit__(self, *_exc_info: object) -> None:
        self.stop()


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """``tools/pulsar_cluster.py``: run a cluster of several brokers until Ctrl-C."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(
        description="Run an Apache Pulsar cluster (ZooKeeper, a bookie, brokers) on loopback."
    )
    parser.add_argument("--version", default=PULSAR_VERSION)
    parser.add_argument("--name", default="cluster", help="cluster name")
    parser.add_argument("--brokers", type=int, default=2)
    parser.add_argument("--data", type=Path, help="data directory (default: a new temp dir)")
    args = parser.parse_args(argv)
    data = args.data or Path(tempfile.mkdtemp(prefix=f"pulsar-{args.name}-"))
    try:
        cluster = PulsarCluster(
            ClusterSpec(args.name, data, brokers=args.brokers), resolve_jars(args.version)
        )
        started = time.monotonic()
        cluster.start()
    except PulsarSetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(
        f"PULSAR_CLUSTER_READY {cluster.service_urls} {cluster.admin_url}"
        f" (started in {time.monotonic() - started:.1f} s; data {data}); Ctrl-C stops it",
        flush=True,
    )
    signal.signal(signal.SIGTERM, _interrupted)
    with contextlib.suppress(KeyboardInterrupt):
        while cluster.running:
            time.sleep(1)
    cluster.stop()
    return 0
