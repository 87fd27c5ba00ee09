"""Subscription sync beside real Apache Pulsar: how soon an acknowledgement on A shows on
B, with georep's gateway and with Pulsar's own replicated subscriptions, on the same pair.

Two Pulsar standalones A and B (E=Qw=Qa=1, journal sync on, replicated subscriptions
enabled) with Pulsar's geo-replication of two namespaces, and a georep gateway beside each
(``kind = "pulsar"``, the sync-only deployment of docs/SUBSYNC.md) that syncs one of them:

- ``georep``: namespace ``bench/gsync``, every subscription synced by the gateways (mode
  full, ``subscriptions = "all"``, poll every ``--poll-interval`` s); the application
  does not set Pulsar's replicated-subscription flag, so Pulsar's own sync stays out;
- ``pulsar``: namespace ``bench/geo``, Pulsar's replicated subscriptions alone (the flag
  set, a snapshot every second, Pulsar's default).

Per target, one after the other, the same work: a child process publishes ``--rate``
msgs/s of 1 KiB unbatched on A for ``--seconds`` and consumes them on A (Shared),
acknowledging every message as it
arrives, in order, and recording when it called ``acknowledge()``. A monitor polls B's
``internalStats`` every ``--monitor-interval`` s and keeps each change of the
subscription's cursor with the time its answer arrived. Every copy on B names its
position on A (Pulsar's ``__MSG_PROP_REPL_SOURCE_POSITION``), so for every entry
acknowledged on A after ``--warmup`` s::

    lag_ms = first poll answer on B showing its copy acknowledged - ack time on A

(an upper bound by up to one monitor interval plus one request; the client's 100 ms ack
grouping is inside it, for both targets). ``never_seen_on_b``: entries acknowledged on
A that B's cursor did not show acknowledged within ``--drain`` s after the last ack.

With ``--rtt-ms``, A and B reach each other only across an emulated WAN link
(georep/wan/toxiproxy.py): Pulsar's replicators (data and snapshot markers) and the
gateways both; the application and the monitor stay local to their cluster.

    python bench/subsync_pulsar.py [--rate 1000] [--seconds 20] [--targets georep,pulsar]
                                   [--rtt-ms 80]

Progress goes to stderr; only the JSON goes to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import multiprocessing
import os
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from harness import add_scratch_arguments, machine, percentile, run_in_scratch

from georep.domain.position import Position
from georep.pulsar_text.cursor import acknowledged, parse_cursor, parse_position
from georep.runtime.processes import ManagedProcess, georep_command
from georep.wan.toxiproxy import Toxiproxy

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Event

    from georep.pulsar_text.cursor import Range
    from pulsar_tools.standalone import PulsarStandalone

#: What the application on A puts: when it started, and (ledger, entry, seconds since) of
#: each acknowledgement.
Acks = tuple[float, list[tuple[int, int, float]]]

SIZE = 1024
TENANT = "bench"
NAMESPACES = {"georep": "gsync", "pulsar": "geo"}
SOURCE_POSITION = "__MSG_PROP_REPL_SOURCE_POSITION"


def progress(text: str) -> None:
    print(f"\r{text:<78}", end="", file=sys.stderr, flush=True)


def quiet_client(url: str) -> Any:  # a pulsar.Client
    import pulsar

    return pulsar.Client(
        url,
        operation_timeout_seconds=60,
        logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, os.devnull),
    )


# --- the application on A, in its own process (pulsar-client blocks) ---------------------
def application(
    service_url: str,
    topic: str,
    rate: int,
    seconds: float,
    flagged: bool,
    result: Queue[Acks],
    done: Event,
) -> None:
    import pulsar

    client = quiet_client(service_url)
    consumer = client.subscribe(
        topic,
        "s",
        consumer_type=pulsar.ConsumerType.Shared,
        replicate_subscription_state_enabled=flagged,
        initial_position=pulsar.InitialPosition.Earliest,
        receiver_queue_size=1000,
    )
    producer = client.create_producer(
        topic, batching_enabled=False, max_pending_messages=5000, block_if_queue_full=True
    )
    total = int(rate * seconds)

    def publish() -> None:
        payload = os.urandom(SIZE)
        started = time.monotonic()
        for sent in range(total):
            producer.send_async(payload, None)
            time.sleep(max(0.0, started + (sent + 1) / rate - time.monotonic()))
        producer.flush()

    publisher = threading.Thread(target=publish)
    publisher.start()
    started = time.time()
    acks: list[tuple[int, int, float]] = []
    while len(acks) < total:
        message = consumer.receive(60_000)
        consumer.acknowledge(message)
        message_id = message.message_id()
        acks.append((message_id.ledger_id(), message_id.entry_id(), time.time() - started))
    publisher.join()
    result.put((started, acks))
    done.wait()  # the consumer stays: a subscription is synced from where its consumers are
    client.close()


# --- B's cursor, polled -------------------------------------------------------------------
class Monitor:
    """B's cursor of ``s`` on ``topic``: each change, with when its answer arrived."""

    def __init__(self, admin_url: str, topic: str, interval_s: float) -> None:
        from pulsar_tools.admin import PulsarAdmin

        self.admin = PulsarAdmin(admin_url, timeout_s=5)
        self.topic = topic
        self.interval_s = interval_s
        self.samples: list[tuple[float, Position, list[Range]]] = []
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        last = None
        while not self._stop.is_set():
            try:
                cursor = self.admin.internal_stats(self.topic)["cursors"].get("s")
            except Exception:  # the topic or its cursor appears later
                cursor = None
            self.polls += 1
            if cursor is not None:
                state = parse_cursor(cursor)
                if state != last:
                    last = state
                    self.samples.append((time.time(), *state))
            self._stop.wait(self.interval_s)

    def first_seen(self, where: Position) -> float | None:
        """When B's cursor first showed ``where`` acknowledged (acks are never undone, so
        the first sample showing it is found by bisection)."""
        if not self.samples or not acknowledged(where, *self.samples[-1][1:]):
            return None
        index = bisect.bisect_left(
            range(len(self.samples)),
            True,
            key=lambda i: acknowledged(where, self.samples[i][1], self.samples[i][2]),
        )
        return self.samples[index][0]


def copies_on(service_url: str, topic: str, expected: int) -> dict[Position, Position]:
    """A position -> B position of every copy of ``topic`` on B."""
    import pulsar

    client = quiet_client(service_url)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        out: dict[Position, Position] = {}
        while len(out) < expected:
            try:
                message = reader.read_next(10_000)
            except pulsar.Timeout:
                break
            origin = message.properties().get(SOURCE_POSITION)
            if origin:
                message_id = message.message_id()
                out[parse_position(origin)] = Position(
                    message_id.ledger_id(), message_id.entry_id()
                )
        return out
    finally:
        client.close()


async def measure(
    target: str, a: PulsarStandalone, b: PulsarStandalone, args: argparse.Namespace
) -> dict[str, Any]:
    topic = f"persistent://{TENANT}/{NAMESPACES[target]}/lag-{int(time.time())}"
    monitor = Monitor(b.admin_url, topic, args.monitor_interval)
    monitor.start()
    context = multiprocessing.get_context("spawn")
    result: Queue[Acks] = context.Queue()
    done = context.Event()
    app = context.Process(
        target=application,
        args=(a.service_url, topic, args.rate, args.seconds, target == "pulsar", result, done),
    )
    app.start()
    try:
        progress(f"{target}: publishing and acknowledging on A for {args.seconds:.0f} s")
        started, acks = await asyncio.to_thread(result.get, True, args.seconds * 4 + 120)
        progress(f"{target}: reading B's copies")
        copies = await asyncio.to_thread(copies_on, b.service_url, topic, len(acks))
        deadline = time.monotonic() + args.drain
        last_copy = copies.get(max(copies)) if copies else None
        while time.monotonic() < deadline:
            if last_copy is not None and monitor.first_seen(last_copy) is not None:
                break
            progress(f"{target}: waiting for B to show the last acknowledgement")
            await asyncio.sleep(0.5)
        await asyncio.sleep(2 * args.monitor_interval)
    finally:
        done.set()
        monitor.stop()
        await asyncio.to_thread(app.join, 30)
    lags, never = [], 0
    for ledger_id, entry_id, at in acks:
        if at < args.warmup:
            continue
        copy = copies.get(Position(ledger_id, entry_id))
        seen = monitor.first_seen(copy) if copy is not None else None
        if seen is None:
            never += 1
            continue
        lags.append((seen - (started + at)) * 1000)
    lags.sort()
    return {
        "entries_acknowledged": len(acks),
        "copies_on_b": len(copies),
        "measured": len(lags),
        "never_seen_on_b": never,
        "lag_ms": {
            "p50": round(percentile(lags, 0.5), 1),
            "p99": round(percentile(lags, 0.99), 1),
            "max": round(lags[-1], 1),
        }
        if lags
        else None,
        "monitor": {"polls": monitor.polls, "changes_seen": len(monitor.samples)},
    }


async def main(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    from pulsar_tools.standalone import (
        PULSAR_VERSION,
        PulsarStandalone,
        StandaloneSpec,
        resolve_jars,
    )

    lib = await asyncio.to_thread(resolve_jars, say=progress)
    pair = [PulsarStandalone(StandaloneSpec(n, root / f"pulsar-{n}"), lib) for n in "AB"]
    gateways: list[ManagedProcess] = []
    toxiproxy = Toxiproxy.start(root / "toxiproxy.log") if args.rtt_ms else None
    try:
        for standalone in pair:
            progress(f"starting Pulsar standalone {standalone.name}")
            await asyncio.to_thread(standalone.start)
        # How each cluster is reached from the other: directly, or across the link
        far: dict[str, PulsarStandalone | SimpleNamespace] = {
            standalone.name: standalone for standalone in pair
        }
        if toxiproxy is not None:
            for standalone in pair:
                far[standalone.name] = across(toxiproxy, standalone, args.rtt_ms)
        for namespace in NAMESPACES.values():
            await asyncio.to_thread(link_over, pair, far, TENANT, namespace)
        for local, remote_here in (pair, pair[::-1]):
            remote = far[remote_here.name]
            config = root / f"gateway-{local.name}.toml"
            config.write_text(
                f'[gateway]\nlisten = "127.0.0.1:0"\n'
                f'metadata = "sqlite:///{root / f"gateway-{local.name}.db"}"\n'
                f"discovery_interval_s = 0.5\n"
                f'[local]\nname = "{local.name}"\nkind = "pulsar"\n'
                f'service_url = "{local.service_url}"\nadmin_url = "{local.admin_url}"\n'
                f'[remotes.{remote.name}]\nkind = "pulsar"\n'
                f'service_url = "{remote.service_url}"\nadmin_url = "{remote.admin_url}"\n'
                f"[subscription_sync]\npoll_interval_s = {args.poll_interval}\n"
                f'[subscription_sync.namespaces."{TENANT}/{NAMESPACES["georep"]}"]\n'
                'subscriptions = "all"\n'
            )
            gateway = ManagedProcess(
                georep_command("gateway", "--config", str(config)),
                "GATEWAY_READY",
                log_path=root / f"gateway-{local.name}.log",
            )
            await gateway.start()
            gateways.append(gateway)
        results = {}
        for target in args.targets.split(","):
            results[target] = await measure(target, pair[0], pair[1], args)
        progress("done")
        print(file=sys.stderr)
        return {
            "bench": "subsync_pulsar",
            "pulsar": PULSAR_VERSION,
            "machine": machine(),
            "load_average_at_start": args.load_at_start,
            "rate": args.rate,
            "seconds": args.seconds,
            "poll_interval_s": args.poll_interval,
            "monitor_interval_s": args.monitor_interval,
            "link_rtt_ms": args.rtt_ms,
            "targets": results,
        }
    finally:
        for gateway in gateways:
            await gateway.terminate()
        for standalone in pair:
            await asyncio.to_thread(standalone.stop)
        if toxiproxy is not None:
            toxiproxy.stop()


def across(toxiproxy: Toxiproxy, standalone: Any, rtt_ms: float) -> SimpleNamespace:
    """``standalone`` as the other cluster reaches it: through links that delay every
    byte by half of ``rtt_ms`` each way (a standalone answers lookups "through the service
    URL", so Pulsar's replicator and the gateway both stay on the link)."""
    broker = toxiproxy.link(f"{standalone.name}-broker", f"127.0.0.1:{standalone.spec.broker_port}")
    admin = toxiproxy.link(f"{standalone.name}-admin", f"127.0.0.1:{standalone.spec.web_port}")
    for link in (broker, admin):
        link.delay(rtt_ms)
    return SimpleNamespace(
        name=standalone.name,
        service_url=f"pulsar://{broker.address}",
        admin_url=f"http://{admin.address}",
    )


def link_over(pair: list[Any], far: dict[str, Any], tenant: str, namespace: str) -> None:
    """Pulsar's geo-replication of ``tenant/namespace``, each cluster registered on the
    other at the address ``far`` gives (across the link, when there is one)."""
    from pulsar_tools.admin import PulsarAdmin

    names = [standalone.name for standalone in pair]
    for local in pair:
        admin = PulsarAdmin(local.admin_url)
        for other in pair:
            if other is not local:
                remote = far[other.name]
                admin.ensure_cluster(remote.name, remote.admin_url, remote.service_url)
        admin.ensure_tenant(tenant, names)
        admin.ensure_namespace(tenant, namespace)
        admin.set_replication_clusters(tenant, namespace, names)


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--drain", type=float, default=30.0)
    parser.add_argument("--poll-interval", type=float, default=0.2)
    parser.add_argument("--monitor-interval", type=float, default=0.05)
    parser.add_argument("--targets", default="georep,pulsar")
    parser.add_argument(
        "--rtt-ms", type=float, default=0.0, help="an emulated WAN link between A and B"
    )
    add_scratch_arguments(parser)
    args = parser.parse_args()
    args.load_at_start = round(os.getloadavg()[0], 1)
    run_in_scratch(args, main)


if __name__ == "__main__":
    cli()
