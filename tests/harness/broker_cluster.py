"""Test harness for the embedded broker, driven by the official pulsar-client.

The client's calls block, and the broker runs on asyncio, so the two never share a
thread:

- :class:`InProcessCluster` runs a ``Cluster`` (in-process bookies, SQLite metadata) on an
  event loop in a background thread; the test drives pulsar-client from its own thread and
  may look at broker state with :meth:`InProcessCluster.call` (runs a coroutine function
  on the broker's loop and returns its result);
- :class:`ClusterProcess` runs ``georep cluster`` as a child process: started, waited for
  (``CLUSTER_READY``), stopped with SIGTERM or killed with SIGKILL, restarted on the same
  data directory and ports.

:func:`client` makes a pulsar.Client with short timeouts and quiet logs; close it (the
``with closing(client(...))`` form does). Topic names should be unique per test
(:func:`unique_topic`): one cluster serves a whole test module.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

import pulsar

from georep.broker.cluster import Cluster, ClusterConfig
from georep.broker.service import BrokerService
from georep.wire import commands, frames
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import Type
from georep.wire.errors import PulsarProtocolError

#: Client-side deadlines: short, so a broker bug fails a test fast instead of hanging it.
OPERATION_TIMEOUT_S = 10
RECEIVE_TIMEOUT_MS = 5_000
#: How long a test waits for something that should not come.
QUIET_MS = 500

_topics = itertools.count()


def unique_topic(prefix: str = "t") -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}-{next(_topics)}"


def client(url: str, **options: Any) -> pulsar.Client:
    options.setdefault("operation_timeout_seconds", OPERATION_TIMEOUT_S)
    options.setdefault("connection_timeout_ms", 3_000)
    options.setdefault("logger", pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    return pulsar.Client(url, **options)


@contextlib.contextmanager
def open_client(url: str, **options: Any) -> Iterator[pulsar.Client]:
    pulsar_client = client(url, **options)
    try:
        yield pulsar_client
    finally:
        pulsar_client.close()


def receive_all(consumer: pulsar.Consumer, count: int, *, ack: bool = True) -> list[pulsar.Message]:
    """Receive exactly ``count`` messages (each within RECEIVE_TIMEOUT_MS), acking each."""
    out = []
    for _ in range(count):
        message = consumer.receive(timeout_millis=RECEIVE_TIMEOUT_MS)
        if ack:
            consumer.acknowledge(message)
        out.append(message)
    return out


def receive_none(consumer: pulsar.Consumer, wait_ms: int = QUIET_MS) -> list[bytes]:
    """What arrives within ``wait_ms`` (expected: nothing)."""
    extra = []
    with contextlib.suppress(pulsar.Timeout):
        while True:
            extra.append(consumer.receive(timeout_millis=wait_ms).data())
    return extra


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def service_of(cluster: Cluster) -> BrokerService:
    """The broker service of a started ``cluster``."""
    assert cluster.service is not None, "the cluster is not started"
    return cluster.service


class InProcessCluster:
    """A Cluster on an event loop in a daemon thread."""

    def __init__(self, data_dir: Path, **config: Any) -> None:
        config.setdefault("name", "test")
        config.setdefault("fsync", False)
        self.config = ClusterConfig(data_dir=data_dir, **config)
        self.cluster: Cluster | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._errors: list[dict] = []
        self._loop.set_exception_handler(self._record_error)

    def _record_error(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        self._errors.append(context)
        loop.default_exception_handler(context)

    @property
    def errors(self) -> list[dict]:
        """What the loop's exception handler saw: must stay empty."""
        return list(self._errors)

    @property
    def running(self) -> Cluster:
        """The started cluster."""
        assert self.cluster is not None, "the cluster is not started"
        return self.cluster

    @property
    def url(self) -> str:
        return self.running.broker_url

    @property
    def admin_url(self) -> str:
        """The admin REST's URL (the cluster runs one when given an admin port)."""
        assert self.running.admin_url is not None, "the cluster runs no admin REST"
        return self.running.admin_url

    def start(self) -> InProcessCluster:
        self._thread.start()
        self.cluster = self._run(Cluster(self.config).start(), timeout_s=60)
        return self

    def call(self, function: Callable[[Cluster], Any], timeout_s: float = 30) -> Any:
        """Run ``function(cluster)`` (a coroutine function or a plain one) on the loop."""

        async def run() -> Any:
            result = function(self.running)
            if asyncio.iscoroutine(result):
                result = await result
            return result

        return self._run(run(), timeout_s)

    def _run(self, coroutine, timeout_s: float) -> Any:
        future: Future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout_s)

    def stop(self) -> None:
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self._run(self.cluster.stop(), timeout_s=60)
            self.cluster = None
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        if not self._loop.is_running():
            self._loop.close()


class ChildProcess:
    """A georep server as a child process: started, awaited until it prints its
    ``<NAME>_READY`` line (stdout drained afterwards so it never blocks on a full pipe;
    stderr appended to ``log_path``), killed or terminated. Shared by the harnesses."""

    log_path: Path
    process: subprocess.Popen | None = None

    def _spawn(self, args: list[str], ready_prefix: str, timeout_s: float, env=None) -> str:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                args,
                stdout=subprocess.PIPE,
                stderr=log,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            )
        lines: list[str] = []
        reader = threading.Thread(target=self._read_ready, args=(lines, ready_prefix), daemon=True)
        reader.start()
        reader.join(timeout_s)
        if not lines or not lines[-1].startswith(ready_prefix):
            self.kill()
            raise RuntimeError(f"{' '.join(args[2:4])} did not start; see {self.log_path}")
        return lines[-1]

    def _read_ready(self, lines: list[str], ready_prefix: str) -> None:
        assert self.process is not None and self.process.stdout is not None
        stdout = self.process.stdout
        for raw in stdout:
            line = raw.decode(errors="replace").strip()
            lines.append(line)
            if line.startswith(ready_prefix):
                threading.Thread(target=self._drain, args=(stdout,), daemon=True).start()
                return
        stdout.close()  # the process ended before it was ready

    @staticmethod
    def _drain(stdout: IO[bytes]) -> None:
        """Read the process's stdout to its end (the process gone), then close it."""
        with contextlib.suppress(Exception), stdout:
            for _ in stdout:
                pass

    def kill(self) -> None:
        """SIGKILL: no shutdown path runs."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)

    def terminate(self, timeout_s: float = 30) -> int:
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.wait()


class ClusterProcess(ChildProcess):
    """``georep cluster`` as a child process, restartable on the same directory and ports."""

    def __init__(
        self,
        data_dir: Path,
        *,
        name: str = "test",
        fsync: bool = False,
        extra: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.env = env
        self.name = name
        self.fsync = fsync
        self.extra = list(extra)
        self.broker_port = free_port()
        self.admin_port = free_port()
        self.process: subprocess.Popen | None = None
        self.ready_line = ""
        self.log_path = data_dir.parent / f"{data_dir.name}.log"

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.broker_port}"

    def start(self, timeout_s: float = 60) -> str:
        """Start the process. Ports chosen by free_port() can be taken by another socket
        (an outgoing connection's ephemeral port) before the child binds them: a first
        start that loses a port retries on fresh ports; a restart keeps its ports."""
        for attempt in range(3):
            log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
            try:
                return self._start_once(timeout_s)
            except RuntimeError:
                with open(self.log_path, "rb") as log:
                    log.seek(log_offset)
                    said = log.read()
                    lost_port = b"address already in use" in said or b" is in use" in said
                if not lost_port or self.ready_line or attempt == 2:
                    raise
                self.broker_port = free_port()
                self.admin_port = free_port()
        raise AssertionError("unreachable")

    def _start_once(self, timeout_s: float) -> str:
        args = [
            sys.executable,
            "-m",
            "georep",
            "cluster",
            "--name",
            self.name,
            "--data",
            str(self.data_dir),
            "--broker-port",
            str(self.broker_port),
            "--admin-port",
            str(self.admin_port),
        ]
        if not self.fsync:
            args.append("--no-fsync")
        args += self.extra
        self.ready_line = self._spawn(args, "CLUSTER_READY", timeout_s, self.env)
        return self.ready_line


class RawConnection:
    """A raw socket to the broker, for what pulsar-client will not send (fuzz, markers)."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("pulsar://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self.decoder = frames.FrameDecoder()

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            pass  # the broker closed already

    def replies(self, wait_s: float = 0.3) -> tuple[list[pb.BaseCommand], bool]:
        """Commands received within ``wait_s``, and whether the broker closed."""
        self.sock.settimeout(wait_s)
        out = []
        closed = False
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    closed = True
                    break
                self.decoder.feed(data)
                out += [frame.command for frame in self.decoder.frames()]
        except TimeoutError:
            pass
        except ConnectionResetError:
            closed = True
        except PulsarProtocolError:
            pass
        return out, closed

    def close(self) -> None:
        self.sock.close()


def connect_frame() -> bytes:
    return frames.encode_command(
        commands.build(Type.CONNECT, client_version="fuzz", protocol_version=20)
    )


def producer_frame(topic: str, producer_id: int = 1, name: str = "") -> bytes:
    return frames.encode_command(
        commands.build(
            Type.PRODUCER, topic=topic, producer_id=producer_id, request_id=1, producer_name=name
        )
    )


def send_frame(
    producer_id: int, sequence_id: int, payload: bytes = b"x", *, marker_type: int | None = None
) -> bytes:
    metadata = pb.MessageMetadata(producer_name="", sequence_id=sequence_id, publish_time=1)
    if marker_type is not None:
        metadata.marker_type = marker_type
    return frames.encode_payload_command(
        commands.build(Type.SEND, producer_id=producer_id, sequence_id=sequence_id),
        metadata,
        payload,
    )


def admin_call(base_url: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One admin REST request: (status, decoded JSON body or None)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        base_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        raw = error.read()
        return error.code, json.loads(raw) if raw else None
