"""Replication across an emulated WAN link: georep's gateway and Pulsar's own replicator
on the same kind of link, in one run (docs/WAN.md).

Prints one JSON object. The link is a toxiproxy (georep/wan/toxiproxy.py) in front of
cluster B's broker and admin ports, delaying every byte by half of ``--rtt-ms`` each way
(80 ms round trip by default), capped at ``--cap-kib-s`` each way if given. Only the
replication crosses it: producers publish on A, readers read B directly. 1 KiB messages.

- **georep**: two ``georep cluster`` processes (three in-process bookies each, E=3 Qw=2
  Qa=2, fsync on) and a ``georep gateway`` beside A whose remote B is the link's address.
- **Pulsar**: two Apache Pulsar standalones (E=Qw=Qa=1, journal sync on) with Pulsar's
  geo-replication, cluster B registered on A at the link's address; a standalone answers
  lookups "through the service URL", so the replicator stays on the link.

Scenarios, per target, each on a namespace of its own:

- **drain, batched**: replication on and a first message across; then the link down (an
  outage: connections reset, new ones refused) while ``--messages`` messages are
  published on A (the client's batching, 5 ms); then the link up: messages per second
  that arrive on B (B's ``msgInCounter``, polled every 0.1 s), from the first to the
  last (from the link's return when most arrived before the first poll saw any), and
  the seconds from the link's return to the last.
- **drain, unbatched**: a tenth as many, one message per entry: the cost per entry.
- **lag**: ``--rate`` msgs/s published on A for ``--seconds`` (one message per entry
  unless ``--lag-batched``) while a consumer on B receives them: each message's receive
  time on B minus its publish time on A; p50/p99/max after ``--warmup`` seconds.

Then ``ratio_georep_to_pulsar`` for each figure (throughput: higher is better for
georep; lag: lower is better).

    python bench/wan.py [--rtt-ms 80] [--cap-kib-s N] [--messages 200000] [--rate 1000]
                        [--seconds 30] [--target both|georep|pulsar]

Progress goes to stderr; only the JSON goes to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import sys
import time
from pathlib import Path
from typing import Any

from harness import (
    SIZE,
    add_scratch_arguments,
    http,
    machine,
    progress,
    publish_backlog,
    replicator_of,
    run_in_scratch,
    start_clusters,
    start_gateway,
    steady_lag,
)

from georep.runtime.processes import ManagedProcess
from georep.wan.toxiproxy import Toxiproxy, WanLink

TENANT = "bench"
DRAIN_BATCHED = "bench/wan-batched"
DRAIN_UNBATCHED = "bench/wan-unbatched"
LAG = "bench/wan-lag"
NAMESPACES = (DRAIN_BATCHED, DRAIN_UNBATCHED, LAG)


def arrived_on(admin_url: str, topic: str) -> int:
    """Messages B's broker took on ``topic`` (0 before the topic exists)."""
    try:
        stats = http("GET", f"{admin_url}/admin/v2/persistent/{topic.split('://', 1)[1]}/stats")
    except Exception:
        return 0
    return int(stats.get("msgInCounter", 0)) if isinstance(stats, dict) else 0


async def drain(
    a_url: str,
    b_admin_url: str,
    namespace: str,
    messages: int,
    batching: bool,
    switch_on: Any,
    links: list[WanLink],
    tag: str,
) -> dict[str, Any]:
    """Replication on and running (a first message arrived on B), then the link down
    while the backlog is published on A, then up again: its arrival on B is timed."""
    topic = f"persistent://{namespace}/backlog"
    await asyncio.to_thread(switch_on, namespace, topic)
    progress(f"{tag}: the first message across")
    await asyncio.to_thread(publish_backlog, a_url, topic, 1, batching)
    while True:  # polled over HTTP: no event to wait on
        if await asyncio.to_thread(arrived_on, b_admin_url, topic) >= 1:
            break
        await asyncio.sleep(0.2)
    for link in links:
        link.outage()
    progress(f"{tag}: link down, publishing {messages:,} messages on A")
    process = multiprocessing.Process(
        target=publish_backlog, args=(a_url, topic, messages, batching)
    )
    process.start()
    await asyncio.to_thread(process.join)
    started = time.monotonic()
    for link in links:
        link.heal()
    first = None
    while True:
        count = await asyncio.to_thread(arrived_on, b_admin_url, topic) - 1
        now = time.monotonic()
        if count and first is None:
            first = (now, count)
        progress(f"{tag}: {count:,} / {messages:,} on B")
        if count >= messages:
            break
        if now - started > 1800:
            raise TimeoutError(f"{tag}: {count:,} of {messages:,} on B after 30 minutes")
        await asyncio.sleep(0.1)
    assert first is not None
    elapsed = now - first[0]
    if count - first[1] < messages // 2:  # most arrived before the first poll saw any
        elapsed, first = now - started, (started, 0)
    return {
        "messages": messages,
        "batching": batching,
        "msgs_per_s": round((count - first[1]) / elapsed),
        "seconds": round(elapsed, 2),
        "seconds_from_link_up": round(now - started, 2),
        "arrived_on_b": count,
    }


async def scenarios(
    a_url: str,
    b_url: str,
    b_admin_url: str,
    switch_on: Any,
    status: Any,
    links: list[WanLink],
    args: argparse.Namespace,
) -> dict[str, Any]:
    result = {
        "drain_batched": await drain(
            a_url, b_admin_url, DRAIN_BATCHED, args.messages, True, switch_on, links, "batched"
        ),
        "drain_unbatched": await drain(
            a_url,
            b_admin_url,
            DRAIN_UNBATCHED,
            args.messages // 10,
            False,
            switch_on,
            links,
            "unbatched",
        ),
    }
    topic = f"persistent://{LAG}/steady"
    await asyncio.to_thread(switch_on, LAG, topic)
    result["lag"] = await steady_lag(
        a_url,
        b_url,
        topic,
        args.rate,
        args.seconds,
        args.warmup,
        lambda: status(topic),
        batching=args.lag_batched,
    )
    return result


def shape(link: WanLink, args: argparse.Namespace) -> None:
    link.delay(args.rtt_ms)
    if args.cap_kib_s:
        link.cap(args.cap_kib_s)


# --- georep --------------------------------------------------------------------------
async def georep_run(args: argparse.Namespace, root: Path, toxiproxy: Toxiproxy) -> dict[str, Any]:
    processes: list[ManagedProcess] = []
    try:
        a, b = await start_clusters(root, False, NAMESPACES, processes)
        b_host = b.url.removeprefix("pulsar://")
        broker = toxiproxy.link("georep-b-broker", b_host)
        admin = toxiproxy.link("georep-b-admin", b.admin_url.removeprefix("http://"))
        for link in (broker, admin):
            shape(link, args)
        gateway, gateway_url = await start_gateway(
            root,
            a,
            f"pulsar://{broker.address}",
            f"http://{admin.address}",
            ["[subscription_sync]", f'mode = "{args.sync}"'],
        )
        processes.append(gateway)

        def switch_on(namespace: str, _topic: str) -> None:
            http(
                "PUT",
                f"{gateway_url}/admin/georep/v1/namespaces/{namespace}/replication",
                {"clusters": ["B"]},
            )

        def status(topic: str) -> str:
            stats = replicator_of(gateway_url, topic)
            return f"{stats['msgOutCounter']:,} replicated" if stats else "no replicator yet"

        result = await scenarios(
            a.url, b.url, b.admin_url, switch_on, status, [broker, admin], args
        )
        return {"target": "georep: E=3 Qw=2 Qa=2, fsync on", "sync": args.sync, **result}
    finally:
        for process in reversed(processes):
            await process.terminate()


# --- Pulsar --------------------------------------------------------------------------
async def pulsar_run(args: argparse.Namespace, root: Path, toxiproxy: Toxiproxy) -> dict[str, Any]:
    from pulsar_tools.admin import PulsarAdmin, PulsarAdminError
    from pulsar_tools.standalone import (
        PULSAR_VERSION,
        PulsarStandalone,
        StandaloneSpec,
        resolve_jars,
    )

    lib = await asyncio.to_thread(resolve_jars, say=progress)
    a, b = (PulsarStandalone(StandaloneSpec(n, root / f"pulsar-{n}"), lib) for n in "AB")
    try:
        for standalone in (a, b):
            progress(f"pulsar: starting standalone {standalone.name}")
            await asyncio.to_thread(standalone.start)
        broker = toxiproxy.link("pulsar-b-broker", f"127.0.0.1:{b.spec.broker_port}")
        admin_link = toxiproxy.link("pulsar-b-admin", f"127.0.0.1:{b.spec.web_port}")
        for link in (broker, admin_link):
            shape(link, args)
        admin_a, admin_b = PulsarAdmin(a.admin_url), PulsarAdmin(b.admin_url)
        # A's replicator reaches B only at the link's address
        admin_a.ensure_cluster("B", f"http://{admin_link.address}", f"pulsar://{broker.address}")
        admin_b.ensure_cluster("A", a.admin_url, a.service_url)
        for admin in (admin_a, admin_b):
            admin.ensure_tenant(TENANT, ["A", "B"])
            for namespace in NAMESPACES:
                admin.ensure_namespace(TENANT, namespace.split("/")[1])
        for namespace in NAMESPACES:
            admin_b.set_replication_clusters(TENANT, namespace.split("/")[1], ["A", "B"])

        def switch_on(namespace: str, topic: str) -> None:
            # Pulsar's replicator creates no topic on the remote for a topic that existed
            # before its namespace replicated: the operator does, as for partitions
            with contextlib.suppress(PulsarAdminError):  # 409: it exists
                admin_b.request("PUT", f"/admin/v2/{topic.replace('://', '/')}")
            admin_a.set_replication_clusters(TENANT, namespace.split("/")[1], ["A", "B"])

        def status(topic: str) -> str:
            try:
                replication = admin_a.stats(topic).get("replication", {}).get("B", {})
            except Exception as error:  # the topic appears with the first message
                return f"no stats yet ({error})"
            return (
                f"Pulsar's replicator: {replication.get('msgRateOut', 0):,.0f} msgs/s out,"
                f" backlog {replication.get('replicationBacklog', '?')}"
            )

        result = await scenarios(
            a.service_url, b.service_url, b.admin_url, switch_on, status, [broker, admin_link], args
        )
        return {"target": f"Apache Pulsar {PULSAR_VERSION}, E=Qw=Qa=1, journal sync on", **result}
    finally:
        for standalone in (a, b):
            await asyncio.to_thread(standalone.stop)


def ratios(georep: dict[str, Any], pulsar: dict[str, Any]) -> dict[str, Any]:
    out = {
        f"{name}_msgs_per_s": round(georep[name]["msgs_per_s"] / pulsar[name]["msgs_per_s"], 2)
        for name in ("drain_batched", "drain_unbatched")
        if pulsar[name]["msgs_per_s"]
    }
    for key in ("lag_ms_p50", "lag_ms_p99", "lag_ms_max"):
        if georep["lag"][key] and pulsar["lag"][key]:
            out[key] = round(georep["lag"][key] / pulsar["lag"][key], 2)
    return out


async def main(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    result: dict[str, Any] = {
        "machine": machine(),
        "message_bytes": SIZE,
        "link": {"rtt_ms": args.rtt_ms, "cap_kib_per_s": args.cap_kib_s or None},
    }
    with Toxiproxy.start(root / "toxiproxy.log") as toxiproxy:
        if args.target in ("georep", "both"):
            result["georep"] = await georep_run(args, root, toxiproxy)
        if args.target in ("pulsar", "both"):
            result["pulsar"] = await pulsar_run(args, root, toxiproxy)
    if args.target == "both":
        result["ratio_georep_to_pulsar"] = ratios(result["georep"], result["pulsar"])
    progress("done")
    print(file=sys.stderr)
    return result


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, default=80.0, help="round trip (20, 150, ...)")
    parser.add_argument("--cap-kib-s", type=int, default=0, help="bandwidth cap each way")
    parser.add_argument(
        "--messages", type=int, default=200_000, help="batched backlog (unbatched: a tenth)"
    )
    parser.add_argument("--rate", type=int, default=1_000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--lag-batched", action="store_true", help="batch the lag producer")
    parser.add_argument("--target", choices=("both", "georep", "pulsar"), default="both")
    parser.add_argument(
        "--sync",
        choices=("full", "pulsar-compatible", "off"),
        default="full",
        help="the gateway's subscription sync (full, the default, reads every entry on A)",
    )
    add_scratch_arguments(parser)
    run_in_scratch(parser.parse_args(), main)


if __name__ == "__main__":
    cli()
