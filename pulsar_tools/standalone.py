"""A real Apache Pulsar standalone, from Maven Central jars, on loopback ports.

Two steps, each usable alone:

1. :func:`resolve_jars` asks Maven for ``org.apache.pulsar:pulsar-broker`` of
   :data:`PULSAR_VERSION` and its runtime dependencies (about 320 jars, 235 MB) and copies
   them into ``<cache>/pulsar-<version>/lib``. The cache is ``$GEOREP_PULSAR_CACHE`` or
   ``~/.cache/georep``, outside the repository, and a finished resolve is reused: the
   ``complete`` file beside ``lib`` is written last. Maven runs with a settings file of
   ours that mirrors every repository to Maven Central, because Pulsar's POMs name other
   repositories (Confluent's, for one) that a machine may not reach.

2. :class:`PulsarStandalone` writes a configuration and a log4j2 file of ours into its
   data directory and runs ``org.apache.pulsar.PulsarStandaloneStarter`` with the
   functions worker and stream storage off, one in-process bookie, and RocksDB metadata
   named by ``--metadata-url`` (the starter takes the metadata URL from the flag, not the
   file). Ledgers are E=Qw=Qa=1 and the bookie's journal syncs every group
   (``journalSyncData=true``) so that throughput is compared fsync for fsync with the
   embedded cluster. It is ready when its admin REST lists its own cluster and the
   ``public/default`` namespace, which the starter creates after the broker serves.

Worked example (what ``python tools/pulsar_standalone.py --name A`` does)::

    lib = resolve_jars()                               # first time: downloads, prints time
    a = PulsarStandalone(StandaloneSpec("A", Path("/tmp/a")), lib)
    a.start()                                          # pulsar://127.0.0.1:<port>
    ...
    a.kill()                                           # SIGKILL: the drill's failover

Every failure to set up (no Java, no Maven, a resolve that fails, a JVM that exits or
stays silent) is a :class:`PulsarSetupError` whose message names the log to read.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pulsar_tools.security import PulsarSecurity

#: The Pulsar releases georep is tested against, one per LTS line, newest line first: the
#: newest of each line that resolves whole from the Maven Central this machine reaches.
#: 4.0.8 is released, but its ``jetcd-core-shaded`` and ``pulsar-opentelemetry``
#: artifacts are not there. Of the 3.0 line that Maven Central lists 3.0.0, 3.0.2 and
#: 3.0.7 only (3.0.8 and 3.0.12 are "not found"), and 3.0.7 resolves whole.
SUPPORTED_VERSIONS = ("4.0.7", "3.0.7")
#: Chooses the release a standalone, the drill and the benches run (default: the newest).
VERSION_ENV = "GEOREP_PULSAR_VERSION"


def pulsar_version() -> str:
    """The release ``$GEOREP_PULSAR_VERSION`` chooses, read at each call (a test may set it)."""
    return os.environ.get(VERSION_ENV) or SUPPORTED_VERSIONS[0]


PULSAR_VERSION = pulsar_version()
CACHE_ENV = "GEOREP_PULSAR_CACHE"
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"
STARTER_CLASS = "org.apache.pulsar.PulsarStandaloneStarter"

#: JVM options Pulsar's own launcher (``bin/pulsar``) sets and a standalone needs:
#: BookKeeper and Netty reach into JDK internals (fadvise, CRC32, direct buffers), and the
#: bookie and the BookKeeper client find Pulsar's metadata store through these drivers.
#: Extra JVM options for every standalone, as ``bin/pulsar`` takes them (shell words).
EXTRA_OPTS_ENV = "PULSAR_EXTRA_OPTS"
JVM_OPTIONS = (
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.util.zip=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens=java.base/sun.net=ALL-UNNAMED",
    "--add-opens=java.management/sun.management=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Djava.net.preferIPv4Stack=true",
    "-Dbookkeeper.metadata.bookie.drivers="
    "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver",
    "-Dbookkeeper.metadata.client.drivers="
    "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver",
    "-Dlog4j2.is.webapp=false",
)

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>georep.local</groupId>
  <artifactId>pulsar-standalone-classpath</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
{managed}  <dependencies>
    <dependency>
      <groupId>org.apache.pulsar</groupId>
      <artifactId>pulsar-broker</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""

#: The versions Pulsar's own build manages (its parent POM's dependencyManagement),
#: imported for the lines listed in :data:`_MANAGED_LINES`.
_MANAGED = """  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>org.apache.pulsar</groupId>
        <artifactId>pulsar</artifactId>
        <version>{version}</version>
        <type>pom</type>
        <scope>import</scope>
      </dependency>
    </dependencies>
  </dependencyManagement>
"""
#: Pulsar 3.0's graph holds gRPC modules of several releases (1.45.1 to 1.55.3) whose
#: POMs require one another at exact versions (``[1.45.1]``): Maven's nearest-wins
#: cannot satisfy them all, and its backtracking ran 17 minutes on 3.0.7 without an
#: answer. With the versions Pulsar's build manages (gRPC 1.55.3, the jars
#: its own distribution ships) it resolves in 26 s. The 4.0 line resolves without them,
#: and its classpath is kept as it was measured.
_MANAGED_LINES = ("3.0.",)

_SETTINGS = """<settings>
  <mirrors>
    <mirror>
      <id>maven-central-only</id>
      <mirrorOf>*</mirrorOf>
      <url>{url}</url>
    </mirror>
  </mirrors>
</settings>
"""

#: The log4j2 file every Pulsar JVM of ours runs with (``{log}``: its log file).
LOG4J2_TEMPLATE = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <File name="file" fileName="{log}">
      <PatternLayout pattern="%d{{ISO8601}} %-5p [%t] %c{{1}} - %m%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="info"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
"""


class PulsarSetupError(RuntimeError):
    """Pulsar could not be resolved or started; the message says what to read."""


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "georep")


def java_missing() -> str | None:
    """Why no standalone can run here, or None when Java and Maven are both present."""
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (Pulsar needs Java 17+ and Maven to resolve it)"
    return None


def resolve_jars(version: str | None = None, *, say: Callable[[str], None] = print) -> Path:
    """The directory holding Pulsar ``version``'s jars (default: :func:`pulsar_version`),
    resolved once and then reused."""
    version = version or pulsar_version()
    home = cache_root() / f"pulsar-{version}"
    lib, complete = home / "lib", home / "complete"
    if complete.exists():
        return lib
    missing = java_missing()
    if missing:
        raise PulsarSetupError(missing)
    home.mkdir(parents=True, exist_ok=True)
    # One resolve at a time per cache: a second caller waits, then finds it complete.
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if complete.exists():
            return lib
        managed = _MANAGED.format(version=version) if version.startswith(_MANAGED_LINES) else ""
        (home / "pom.xml").write_text(_POM.format(version=version, managed=managed))
        (home / "settings.xml").write_text(_SETTINGS.format(url=MAVEN_CENTRAL))
        shutil.rmtree(lib, ignore_errors=True)
        say(f"resolving Apache Pulsar {version} from Maven Central into {lib} ...")
        started = time.monotonic()
        log_path = home / "resolve.log"
        with open(log_path, "wb") as log:
            result = subprocess.run(
                [
                    "mvn", "-B", "-q", "-s", str(home / "settings.xml"), "-f",
                    str(home / "pom.xml"), "dependency:copy-dependencies",
                    f"-DoutputDirectory={lib}", "-DincludeScope=runtime",
                ],
                stdout=log, stderr=subprocess.STDOUT, check=False,
            )  # fmt: skip
        if result.returncode != 0:
            tail = log_path.read_text(errors="replace").splitlines()[-5:]
            raise PulsarSetupError(
                f"Maven could not resolve pulsar-broker {version} (exit {result.returncode});"
                f" see {log_path}: " + " | ".join(tail)
            )
        jars = sorted(p.name for p in lib.glob("*.jar"))
        if not any(name.startswith("pulsar-broker-") for name in jars):
            raise PulsarSetupError(f"no pulsar-broker jar in {lib}; see {log_path}")
        complete.write_text("\n".join(jars) + "\n")
        say(
            f"resolved Apache Pulsar {version}: {len(jars)} jars in"
            f" {time.monotonic() - started:.1f} s"
        )
    return lib


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class StandaloneSpec:
    """One standalone's name (its cluster name), data directory and loopback ports
    (0 picks a free one)."""

    name: str
    data_dir: Path
    broker_port: int = 0
    web_port: int = 0
    bookie_port: int = 0
    heap_mb: int = 512
    #: Extra ``broker.conf`` / bookie settings, written after ours (so they win).
    settings: Mapping[str, str] = field(default_factory=dict)
    #: TLS-only client ports, token authentication and authorization (security.py).
    security: PulsarSecurity | None = None

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir).resolve()  # the JVM runs with cwd there
        self.broker_port = self.broker_port or free_port()
        self.web_port = self.web_port or free_port()
        self.bookie_port = self.bookie_port or free_port()


#: Broker keys that one LTS line needs and the other accepts, set on both so that both
#: run one configuration. Pulsar 3.0's broker refuses to start when its load manager
#: cannot read a network card's speed ("Unable to read VM NIC speed"), which this
#: machine's virtual card does not report; 4.0 starts without it. The value only scales
#: the load manager's bandwidth figure, which a single broker never sheds on.
BROKER_SETTINGS_BOTH_LINES = {"loadBalancerOverrideBrokerNicSpeedGbps": "1"}


def standalone_settings(spec: StandaloneSpec) -> dict[str, str]:
    """The configuration file's keys: broker and bookie share it in a standalone."""
    return {
        "clusterName": spec.name,
        "advertisedAddress": "127.0.0.1",
        "bindAddress": "127.0.0.1",
        "brokerServicePort": str(spec.broker_port),
        "webServicePort": str(spec.web_port),
        "managedLedgerDefaultEnsembleSize": "1",
        "managedLedgerDefaultWriteQuorum": "1",
        "managedLedgerDefaultAckQuorum": "1",
        # fsync on, as the embedded cluster's bookies do: compared like for like.
        "journalSyncData": "true",
        "enableReplicatedSubscriptions": "true",
        "allowAutoTopicCreationType": "non-partitioned",
        "brokerDeleteInactiveTopicsEnabled": "false",
        "transactionCoordinatorEnabled": "false",
        # A drill kills brokers: let a restarted one take its topics back at once.
        "brokerShutdownTimeoutMs": "3000",
        **BROKER_SETTINGS_BOTH_LINES,
        **(spec.security.broker_settings(spec.broker_port, spec.web_port) if spec.security else {}),
        **spec.settings,
    }


class PulsarStandalone:
    """One ``PulsarStandaloneStarter`` JVM. ``start`` returns once it serves."""

    def __init__(self, spec: StandaloneSpec, lib_dir: Path) -> None:
        self.spec = spec
        self.lib_dir = lib_dir
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = spec.data_dir / "pulsar.log"
        self.stdout_path = spec.data_dir / "jvm.out"
        self.start_seconds = 0.0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def service_url(self) -> str:
        scheme = "pulsar+ssl" if self.spec.security else "pulsar"
        return f"{scheme}://127.0.0.1:{self.spec.broker_port}"

    @property
    def admin_url(self) -> str:
        scheme = "https" if self.spec.security else "http"
        return f"{scheme}://127.0.0.1:{self.spec.web_port}"

    @property
    def pid(self) -> int:
        return self.process.pid if self.process else -1

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self) -> list[str]:
        data = self.spec.data_dir
        return [
            "java",
            f"-Xms{min(256, self.spec.heap_mb)}m",
            f"-Xmx{self.spec.heap_mb}m",
            f"-XX:MaxDirectMemorySize={self.spec.heap_mb}m",
            *JVM_OPTIONS,
            # the variable Pulsar's own bin/pulsar reads for extra JVM options
            *shlex.split(os.environ.get(EXTRA_OPTS_ENV, "")),
            f"-Dlog4j.configurationFile={data / 'log4j2.xml'}",
            "-cp",
            f"{self.lib_dir}/*",
            STARTER_CLASS,
            "--config", str(data / "standalone.conf"),
            "--no-functions-worker",
            "--no-stream-storage",
            "--metadata-url", f"rocksdb://{(data / 'metadata').resolve()}",
            "--bookkeeper-port", str(self.spec.bookie_port),
            "--bookkeeper-dir", str(data / "bookkeeper"),
        ]  # fmt: skip

    def write_configuration(self) -> None:
        data = self.spec.data_dir
        data.mkdir(parents=True, exist_ok=True)
        lines = [f"{key}={value}" for key, value in standalone_settings(self.spec).items()]
        (data / "standalone.conf").write_text("\n".join(lines) + "\n")
        (data / "log4j2.xml").write_text(LOG4J2_TEMPLATE.format(log=self.log_path))

    def start(self, timeout_s: float = 180.0) -> None:
        """Start the JVM (data kept from an earlier run is reused) and wait until it serves."""
        if self.running:
            raise PulsarSetupError(f"standalone {self.name} is already running")
        self.write_configuration()
        started = time.monotonic()
        with open(self.stdout_path, "ab") as out:
            # cwd is the data directory: the starter resolves its relative paths there
            # (and chooses ZooKeeper mode if it finds a ``data/standalone/zookeeper``).
            self.process = subprocess.Popen(
                self.command(), cwd=self.spec.data_dir, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.wait_ready(deadline=started + timeout_s)
        self.start_seconds = time.monotonic() - started

    def wait_ready(self, *, deadline: float) -> None:
        while True:
            if not self.running:
                code = self.process.returncode if self.process is not None else None
                raise PulsarSetupError(
                    f"standalone {self.name} exited with {code} before"
                    f" serving; see {self.log_path} and {self.stdout_path}"
                )
            if self._serves():
                return
            if time.monotonic() > deadline:
                self.kill()
                raise PulsarSetupError(
                    f"standalone {self.name} did not serve in time; see {self.log_path}"
                )
            time.sleep(0.25)

    def _serves(self) -> bool:
        security = self.spec.security
        token = security.superuser_token if security else None
        context = security.client_context() if security else None
        try:
            clusters = get_json(f"{self.admin_url}/admin/v2/clusters", token=token, context=context)
            namespaces = get_json(
                f"{self.admin_url}/admin/v2/namespaces/public", token=token, context=context
            )
        except (OSError, ValueError):
            return False
        return self.name in clusters and "public/default" in namespaces

    def kill(self) -> None:
        """SIGKILL: no shutdown path runs (the drill's failure of a cluster)."""
        if self.process is not None and self.running:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout_s: float = 30.0) -> int:
        if self.process is None:
            return 0
        if self.running:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.wait()

    def __enter__(self) -> PulsarStandalone:
        self.start()
        return self

    def __exit__(self, *_exc_info: object) -> None:
        self.stop()


def get_json(url: str, *, token: str | None = None, context: ssl.SSLContext | None = None) -> Any:
    """``GET url`` as JSON; ``token``: a bearer token, ``context``: how https is verified."""
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=5, context=context) as response:
        return json.load(response)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """``tools/pulsar_standalone.py``: resolve, and optionally run one standalone."""
    import argparse

    parser = argparse.ArgumentParser(
        description="Resolve Apache Pulsar from Maven Central and run a standalone on loopback."
    )
    parser.add_argument("--version", default=PULSAR_VERSION)
    parser.add_argument("--resolve-only", action="store_true", help="only fetch the jars")
    parser.add_argument("--name", default="standalone", help="cluster name")
    parser.add_argument("--data", type=Path, help="data directory (default: a new temp dir)")
    parser.add_argument("--broker-port", type=int, default=0)
    parser.add_argument("--web-port", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        lib = resolve_jars(args.version)
        if args.resolve_only:
            print(lib)
            return 0
        import tempfile

        data = args.data or Path(tempfile.mkdtemp(prefix=f"pulsar-{args.name}-"))
        spec = StandaloneSpec(args.name, data, broker_port=args.broker_port, web_port=args.web_port)
        standalone = PulsarStandalone(spec, lib)
        standalone.start()
    except PulsarSetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(
        f"PULSAR_READY {standalone.service_url} {standalone.admin_url}"
        f" (started in {standalone.start_seconds:.1f} s; data {data}); Ctrl-C stops it",
        flush=True,
    )
    # SIGTERM (kill, a supervisor) stops the JVM as Ctrl-C does, instead of orphaning it.
    signal.signal(signal.SIGTERM, _interrupted)
    with contextlib.suppress(KeyboardInterrupt):
        if standalone.process is not None:  # started above
            standalone.process.wait()
    standalone.stop()
    return 0
