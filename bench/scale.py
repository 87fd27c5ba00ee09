"""Subscription sync and replication at the shape users run: thousands of topic partitions.

``--target georep``: two ``georep cluster`` processes A and B (``--no-fsync`` by
default: the bench measures the gateway's per-topic cost, not the disk) and a gateway
beside each. ``--partitions`` topic partitions on A, as partitioned topics of
``--partitions-per-topic`` spread over ``--namespaces`` namespaces, each holding one
message before any gateway starts. A's gateway replicates every namespace to B (a
namespace policy) and syncs every subscription (``subscriptions = "all"``); B's gateway
syncs them too (it applies what A sends). Then, in order:

1. **start**: seconds from starting both gateways until every partition is replicated
   (A's gateway reports each replicator connected with backlog 0 and one message out,
   or found on B already by a replicator started again)
   and every partition's sync is attached;
2. **idle**: after ``--settle`` s, ``--idle-seconds`` s with nothing happening: each
   process's CPU share (of one core) and RSS, and the admin requests each cluster
   answered per second (its ``georep_admin_requests_total``);
3. **fresh-ack sync lag**: on ``--sample`` random partitions, one at a time, a consumer
   of subscription ``s`` on A receives the partition's message and acknowledges it; the
   lag is from the acknowledgement until B's ``sync-state`` shows ``s`` past the copy
   (polled every 10 ms: an upper bound by that much plus one request);
4. **restart**: A's gateway killed (SIGKILL), one more message on every partition, the
   gateway started again: seconds until every partition is replicated again and every
   sync attached, and the log lines the gateway wrote meanwhile.

``--target pulsar``: the same shape beside two real Apache Pulsar 4.0.7 standalones, in
either deployment of docs/SUBSYNC.md (``--deployment sync-only``: Pulsar's
geo-replication copies the data; ``replicate``: A's gateway does, by a namespace
policy), with as many partitions again in namespaces of their own synced by Pulsar's
replicated subscriptions, on the same run. Reported: start time until every sync is
attached (and, with ``replicate``, every partition replicated), the gateways' idle admin
requests to Pulsar per second, and the sync lag p50/p99 for both, with the ratio, of a
*fresh* acknowledgement (a message produced moments before, as a live consumer
acknowledges: the window a failover loses) and of an *old* one (a message a Pulsar
snapshot already covers: Pulsar's best case); see :func:`pulsar_lag`.

    python bench/scale.py --target georep --partitions 1000
    python bench/scale.py --target pulsar --partitions 1000 [--deployment replicate]

Progress goes to stderr; only the JSON goes to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from harness import (
    add_scratch_arguments,
    http,
    machine,
    percentile,
    progress,
    put_quietly,
    rss_mib,
    run_in_scratch,
    start_cluster,
    tree_cpu_seconds,
)

from georep import limits
from georep.client.consumer import InitialPosition, SubType
from georep.client.errors import RequestTimeout
from georep.client.link import PulsarLink
from georep.client.producer import LinkProducer
from georep.runtime.awaiting import within
from georep.runtime.processes import ManagedProcess, georep_command
from georep.wire import pulsar_wire_pb2 as wire

TENANT = "scale"


# --- processes -------------------------------------------------------------------------
async def idle_costs(
    pids: dict[str, int], seconds: float, counters: Callable[[], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    """CPU share of one core and RSS per process, and ``counters()`` per second, over
    ``seconds`` of nothing happening."""
    before = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
    counted = await counters()
    started = time.monotonic()
    await asyncio.sleep(seconds)
    elapsed = time.monotonic() - started
    after = {name: tree_cpu_seconds(pid) for name, pid in pids.items()}
    counted_after = await counters()
    cpu = {name: round((after[name] - before[name]) / elapsed, 4) for name in pids}
    return {
        "seconds": round(elapsed, 1),
        "cpu_cores": cpu,
        "cpu_cores_total": round(sum(cpu.values()), 4),
        "rss_mib": {name: rss_mib(pid) for name, pid in pids.items()},
        "requests_per_s": {
            name: round((counted_after[name] - counted.get(name, 0.0)) / elapsed, 2)
            for name in counted_after
            if ":" not in name or counted_after[name] != counted.get(name, 0.0)
        },
    }


# --- topics ----------------------------------------------------------------------------
def layout(args: argparse.Namespace) -> dict[str, int]:
    """Base topic -> partitions: ``--partitions`` in all, over the namespaces."""
    bases: dict[str, int] = {}
    per_topic = args.partitions_per_topic
    count = 0
    index = 0
    while count < args.partitions:
        namespace = f"{TENANT}/ns{index % args.namespaces}"
        partitions = min(per_topic, args.partitions - count)
        bases[f"persistent://{namespace}/t{index}"] = partitions
        count += partitions
        index += 1
    return bases


def leaves(bases: dict[str, int]) -> list[str]:
    return [f"{base}-partition-{i}" for base, count in bases.items() for i in range(count)]


async def produce_one_each(service_url: str, topics: list[str], tag: str) -> None:
    """One message on each topic partition, ``64`` producers at a time."""
    link = PulsarLink(service_url)
    gate = asyncio.Semaphore(16)
    done = 0

    async def one(topic: str) -> None:
        nonlocal done
        async with gate:
            producer: LinkProducer | None = None
            for attempt in range(5):  # a broker loading thousands of topics may be slow
                try:
                    name = f"scale-{tag}-{random.getrandbits(40)}"
                    producer = await link.create_producer(topic, name)
                    break
                except RequestTimeout:
                    if attempt == 4:
                        raise
                    progress(f"producing: {topic}: no answer in time; again")
            assert producer is not None  # the last attempt raises
            metadata = wire.MessageMetadata(
                producer_name=producer.name, sequence_id=0, publish_time=int(time.time() * 1000)
            )
            await producer.send(metadata, f"{tag} {topic}".encode())
            await producer.close()
            done += 1
            if done % 200 == 0:
                progress(f"producing: {done}/{len(topics)}")

    try:
        await asyncio.gather(*(one(topic) for topic in topics))
    finally:
        await link.close()


# --- georep ----------------------------------------------------------------------------
def gateway_toml(
    root: Path,
    local: dict[str, Any],
    remote: dict[str, Any],
    namespaces: list[str],
    policy: bool,
    sync_extra: tuple[str, ...] = (),
) -> Path:
    database = root / f"gateway-{local['name']}.db"
    lines = [
        "[gateway]",
        'listen = "127.0.0.1:0"',
        f'metadata = "sqlite:///{database}"',
        "discovery_interval_s = 2.0",
        "",
        "[local]",
        f'name = "{local["name"]}"',
        f'kind = "{local["kind"]}"',
        f'service_url = "{local["url"]}"',
        f'admin_url = "{local["admin"]}"',
        "",
        f"[remotes.{remote['name']}]",
        f'kind = "{remote["kind"]}"',
        f'service_url = "{remote["url"]}"',
        f'admin_url = "{remote["admin"]}"',
        "",
        "[limits]",
        "replicators_max = 100000",
        "sync_topics_max = 100000",
    ]
    if policy:
        lines += ["", "[policies.namespaces]"]
        lines += [f'"{ns}" = ["{remote["name"]}"]' for ns in namespaces]
    lines += ["", "[subscription_sync]", *sync_extra]
    for namespace in namespaces:
        lines += [f'[subscription_sync.namespaces."{namespace}"]', 'subscriptions = "all"']
    path = root / f"gateway-{local['name']}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def start_gateway(root: Path, config: Path, name: str) -> tuple[ManagedProcess, str]:
    process = ManagedProcess(
        georep_command("--log-level", "WARNING", "gateway", "--config", str(config)),
        "GATEWAY_READY",
        log_path=root / f"gateway-{name}.log",
    )
    detail = await process.start(timeout_s=120)
    return process, detail.split()[0]


def gateway_stats(url: str) -> dict[str, Any]:
    """Every page of the gateway's stats, merged."""
    replicators, syncs, offset = [], [], 0
    while True:
        page: dict[str, Any] = http(
            "GET", f"{url}/admin/georep/v1/stats?limit=10000&offset={offset}"
        )
        replicators += page["replicators"]
        syncs += page["subscriptionSync"]["topics"]
        if page["page"]["next"] is None:
            page["replicators"], page["subscriptionSync"]["topics"] = replicators, syncs
            return page
        offset = page["page"]["next"]


def gateway_stats_changes(url: str) -> dict[str, Any]:
    """``subscriptionSync.changes`` of a gateway's ``/stats``: how it finds changes."""
    document = http("GET", f"{url}/admin/georep/v1/stats?limit=0")
    changes: dict[str, Any] = document["subscriptionSync"]["changes"]
    return changes


def replicated_and_synced(
    url: str, partitions: int, messages: int, replicate: bool
) -> dict[str, Any]:
    stats = gateway_stats(url)
    done = sum(
        1
        for r in stats["replicators"]
        if r["connected"]
        and r["replicationBacklog"] == 0
        and r["msgOutCounter"] + r["alreadyReplicatedCounter"] >= messages
    )
    summary = stats["subscriptionSync"]
    return {
        "replicated": done if replicate else partitions,
        "synced": summary["topicsConnected"],
        "failing": summary["topicsFailing"],
    }


def summary_state(url: str, replicate: bool) -> dict[str, Any]:
    """What the gateway's summaries say (``/health`` and ``/stats?limit=0``): cheap
    beside 10,000 partitions, where a page of every replicator's stats costs the gateway
    half a second of CPU and asking for it every second would slow what is measured."""
    health = http("GET", f"{url}/health")
    replication = list((health.get("replication") or {}).values())
    sync = http("GET", f"{url}/admin/georep/v1/stats?limit=0")["subscriptionSync"]
    replicators = sum(r["replicators"] for r in replication)
    connected = replicators - sum(r["notConnected"] for r in replication)
    backlog = sum(r["backlogEntries"] for r in replication)
    return {
        "connected": connected if replicate else None,
        "backlog": backlog if replicate else 0,
        "synced": sync["topicsConnected"],
    }


async def wait_all(
    url: str, partitions: int, messages: int, label: str, replicate: bool = True
) -> float:
    """Seconds until every partition is replicated and synced: the summaries every
    second, and every replicator's stats (which prove a message went out) only once the
    summaries say every one is connected, caught up and synced."""
    started = time.monotonic()
    checked_at = 0.0
    while True:
        cheap = await asyncio.to_thread(summary_state, url, replicate)
        elapsed = time.monotonic() - started
        connected = partitions if cheap["connected"] is None else cheap["connected"]
        progress(
            f"{label}: {connected}/{partitions} replicators connected (backlog"
            f" {cheap['backlog']}), {cheap['synced']}/{partitions} synced ({elapsed:.0f} s)"
        )
        ready = connected >= partitions and cheap["backlog"] == 0
        if ready and cheap["synced"] >= partitions and time.monotonic() - checked_at >= 5.0:
            checked_at = time.monotonic()
            state = await asyncio.to_thread(
                replicated_and_synced, url, partitions, messages, replicate
            )
            if state["replicated"] >= partitions and state["synced"] >= partitions:
                return elapsed
            progress(f"{label}: {state['replicated']}/{partitions} replicated a message")
        await asyncio.sleep(1.0)


async def wait_swept(urls: dict[str, str], label: str) -> None:
    """Until no gateway has topics left to look at for stray subscriptions."""
    started = time.monotonic()
    while True:
        left = 0
        for url in urls.values():
            stats = await asyncio.to_thread(http, "GET", f"{url}/admin/georep/v1/stats?limit=0")
            left += stats["discovery"].get("topicsToSweep", 0)
        if not left:
            return
        progress(f"{label}: {left} topics still to sweep ({time.monotonic() - started:.0f} s)")
        await asyncio.sleep(1.0)


def admin_requests(admin_url: str) -> float:
    text = http("GET", f"{admin_url}/metrics")
    text = text.decode() if isinstance(text, bytes) else str(text)
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("georep_admin_requests_total{")
    )


async def georep_lag(a: dict[str, Any], b: dict[str, Any], sample: list[str]) -> list[float]:
    """Fresh-ack sync lag on each sampled partition (module docstring, step 3)."""
    link = PulsarLink(a["url"])
    lags = []
    try:
        for index, topic in enumerate(sample):
            progress(f"fresh-ack sync lag: {index + 1}/{len(sample)}")
            consumer = await link.subscribe(
                topic,
                "s",
                sub_type=SubType.SHARED,
                initial_position=InitialPosition.EARLIEST,
                receiver_queue=10,
            )
            entry = await consumer.receive()
            # B's subscription s exists (sync creates it) before the ack is timed.
            await asyncio.sleep(1.0)
            path = topic.removeprefix("persistent://")
            acked_at = time.monotonic()
            consumer.ack_individual([entry.position])
            while time.monotonic() - acked_at < 30:
                state = await asyncio.to_thread(
                    http, "GET", f"{b['admin']}/admin/georep/v1/persistent/{path}/sync-state"
                )
                s = state["subscriptions"].get("s")
                if s is not None and s["markDelete"]["entryId"] >= 0:
                    lags.append((time.monotonic() - acked_at) * 1000)
                    break
                await asyncio.sleep(0.01)
            await consumer.close()
    finally:
        await link.close()
    return lags


async def georep_run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    bases = layout(args)
    topics = leaves(bases)
    namespaces = sorted({base.rsplit("/", 1)[0].removeprefix("persistent://") for base in bases})
    processes: list[ManagedProcess] = []
    try:
        clusters = {}
        for name in ("A", "B"):
            progress(f"starting cluster {name}")
            cluster = await start_cluster(root, name, args.fsync)
            process, url, admin = cluster.process, cluster.url, cluster.admin_url
            processes.append(process)
            clusters[name] = {"name": name, "kind": "georep", "url": url, "admin": admin}
            put_quietly(f"{admin}/admin/v2/tenants/{TENANT}", {"allowedClusters": [name]})
            for namespace in namespaces:
                put_quietly(f"{admin}/admin/v2/namespaces/{namespace}")
        a, b = clusters["A"], clusters["B"]
        for base, partitions in bases.items():
            put_quietly(f"{a['admin']}/admin/v2/persistent/{base[13:]}/partitions", partitions)
        progress(f"producing one message on each of {len(topics)} partitions")
        produced = time.monotonic()
        await produce_one_each(a["url"], topics, "first")
        produce_s = time.monotonic() - produced
        configs = {
            "A": gateway_toml(root, a, b, namespaces, policy=True),
            "B": gateway_toml(root, b, a, namespaces, policy=False),
        }
        gateways = {}
        started = time.monotonic()
        for name in ("A", "B"):
            gateways[name] = await start_gateway(root, configs[name], name)
            processes.append(gateways[name][0])
        await wait_all(gateways["A"][1], len(topics), 1, "start")
        start_s = time.monotonic() - started
        await wait_swept({name: gateway[1] for name, gateway in gateways.items()}, "start")
        progress(f"settling for {args.settle:.0f} s")
        await asyncio.sleep(args.settle)
        pids = {
            "cluster A": processes[0].pid,
            "cluster B": processes[1].pid,
            "gateway A": gateways["A"][0].pid,
            "gateway B": gateways["B"][0].pid,
        }

        async def counters() -> dict[str, Any]:
            return {
                "cluster A admin": await asyncio.to_thread(admin_requests, a["admin"]),
                "cluster B admin": await asyncio.to_thread(admin_requests, b["admin"]),
            }

        progress(f"idle for {args.idle_seconds:.0f} s")
        idle = await idle_costs(pids, args.idle_seconds, counters)
        sample = random.Random(7).sample(topics, min(args.sample, len(topics)))
        lags = await georep_lag(a, b, sample)

        progress("restart: kill -9 of gateway A")
        gateways["A"][0].kill()
        await gateways["A"][0].wait()
        await produce_one_each(a["url"], topics, "second")
        log_path = root / "gateway-A.log"
        lines_before = len(log_path.read_text(errors="replace").splitlines())
        restarted = time.monotonic()
        process, url = await start_gateway(root, configs["A"], "A")
        processes.append(process)
        await wait_all(url, len(topics), 1, "restart")
        restart_s = time.monotonic() - restarted
        log_lines = len(log_path.read_text(errors="replace").splitlines()) - lines_before
        return {
            "partitions": len(topics),
            "topics": len(bases),
            "namespaces": len(namespaces),
            "produce_first_message_s": round(produce_s, 1),
            "start_until_all_replicated_and_synced_s": round(start_s, 1),
            "idle": idle,
            "fresh_ack_sync_lag_ms": {
                "samples": len(lags),
                "p50": round(percentile(lags, 0.5), 1) if lags else None,
                "p99": round(percentile(lags, 0.99), 1) if lags else None,
                "max": round(max(lags), 1) if lags else None,
            },
            "restart_until_all_replicated_and_synced_s": round(restart_s, 1),
            "restart_gateway_log_lines": log_lines,
        }
    finally:
        for process in reversed(processes):
            if process.running:
                await process.terminate()


# --- beside real Pulsar -------------------------------------------------------------------
def acknowledged_on(admin_url: str, topic: str, where: tuple[int, int]) -> bool:
    """Whether subscription ``s`` on a Pulsar cluster acknowledged the entry at ``where``."""
    from georep.domain.position import Position
    from georep.pulsar_text.cursor import acknowledged, parse_cursor

    path = topic.removeprefix("persistent://")
    try:
        stats = http("GET", f"{admin_url}/admin/v2/persistent/{path}/internalStats")
    except urllib.error.HTTPError:
        return False
    cursor = (stats.get("cursors") or {}).get("s")
    if cursor is None:
        return False
    mark_delete, ranges = parse_cursor(cursor)
    return acknowledged(Position(*where), mark_delete, ranges)


async def copies_on(
    link: PulsarLink, topic: str, tags: tuple[str, ...]
) -> dict[str, tuple[int, int]]:
    """Where the copies of the messages tagged ``tags`` sit on a cluster (a non-durable
    reader from the earliest entry; replication markers are never dispatched, so a
    copy's place is read, not assumed)."""
    reader = await link.subscribe(
        topic,
        f"scale-find-{random.getrandbits(32)}",
        durable=False,
        initial_position=InitialPosition.EARLIEST,
        receiver_queue=100,
    )
    found: dict[str, tuple[int, int]] = {}
    try:
        while len(found) < len(tags):
            entry = await within(reader.receive(), 60)
            for tag in tags:
                if entry.payload.startswith(tag.encode() + b" "):
                    found[tag] = (entry.position.ledger_id, entry.position.entry_id)
    finally:
        await reader.close()
    return found


async def pulsar_lag(
    a_url: str,
    b_url: str,
    b_admin: str,
    sample: list[str],
    flag: bool,
    label: str,
    gateways: dict[str, str] | None = None,
) -> dict[str, list[float]]:
    """Sync lag beside Pulsar, per sampled partition: a second message is produced once the
    subscription exists; once both copies are on B, a consumer on A acknowledges both,
    and two clocks run until B shows each copy acknowledged (internalStats every 10 ms):

    - ``fresh``: the message just produced, as a live consumer acknowledges what it was
      just sent. This is the window in which an acknowledgement is lost at a failover:
      Pulsar moves a replicated mark-delete only to a snapshot taken after the message
      (every ``replicatedSubscriptionsSnapshotFrequencyMillis``, 1 s by default).
    - ``old``: the message produced before the run, which a snapshot already covers:
      Pulsar's best case.

    With ``gateways`` (cluster -> the gateway's admin URL), each fresh lag is also cut
    where the gateways saw it (``stages``), on this machine's one wall clock:

    - ``ack_to_told``: until gateway A's scan of Pulsar's metrics page told the
      partition's sync that it changed (the wait for a scan, and the scan);
    - ``told_to_read``: until the sync began to read the states (its one read a period);
    - ``read_to_written``: the state read (``internalStats``, ``stats``) and the marker's
      writing on the side topic;
    - ``written_to_applied``: the side topic's trip to B, gateway B's read and apply;
    - ``applied_to_seen``: the bench's own polling of B.
    """
    link = PulsarLink(a_url)
    link_b = PulsarLink(b_url)
    phase = random.Random(31)  # the same delays for georep's samples and Pulsar's
    lags: dict[str, list[float]] = {"fresh": [], "old": []}
    if gateways is not None:
        lags.update({stage: [] for stage in LAG_STAGES})
    try:
        for index, topic in enumerate(sample):
            progress(f"{label} sync lag: {index + 1}/{len(sample)}")
            consumer = await link.subscribe(
                topic,
                "s",
                sub_type=SubType.SHARED,
                initial_position=InitialPosition.EARLIEST,
                receiver_queue=10,
                replicate_subscription_state=flag,
            )
            await asyncio.sleep(2.0)  # B's copy of the subscription exists
            await produce_one_each(a_url, [topic], "second")
            where = await copies_on(link_b, topic, ("first", "second"))
            first = await consumer.receive()
            second = await consumer.receive()
            # At a random phase of the scans (and of Pulsar's snapshots): each sample
            # starts once the previous one was seen on B, which is just after a scan,
            # so without this every acknowledgement landed at the same point of the
            # cycle (0.9 s before the next scan, at 8 partitions and a 1 s interval).
            await asyncio.sleep(phase.uniform(0.0, PHASE_SPREAD_S))
            acked_at, acked_wall = time.monotonic(), time.time()
            consumer.ack_individual([first.position, second.position])
            waiting = {"old": where["first"], "fresh": where["second"]}
            while waiting and time.monotonic() - acked_at < 60:
                for kind, position in list(waiting.items()):
                    if await asyncio.to_thread(acknowledged_on, b_admin, topic, position):
                        lags[kind].append((time.monotonic() - acked_at) * 1000)
                        if kind == "fresh" and gateways is not None:
                            seen_wall = time.time()
                            cut = await asyncio.to_thread(lag_stages, gateways, topic)
                            if cut is not None:
                                times = [acked_wall, *cut, seen_wall]
                                for stage, start, end in zip(
                                    LAG_STAGES, times, times[1:], strict=False
                                ):
                                    lags[stage].append((end - start) * 1000)
                        del waiting[kind]
                await asyncio.sleep(0.01)
            await consumer.close()
    finally:
        await link.close()
        await link_b.close()
    return lags


#: The spread of the random wait before each acknowledgement: two scan intervals or
#: snapshot periods at their defaults, so every phase of either cycle is sampled.
PHASE_SPREAD_S = 2.0
LAG_STAGES = (
    "ack_to_told",
    "told_to_read",
    "read_to_written",
    "written_to_applied",
    "applied_to_seen",
)


def lag_stages(gateways: dict[str, str], topic: str) -> list[float] | None:
    """The wall-clock times between an acknowledgement and the bench seeing it on B
    (``pulsar_lag`` says what each stage is), from the gateways' ``/stats`` of ``s`` on
    ``topic``; None if either gateway has not got that far."""

    def sync_of(url: str) -> dict[str, Any]:
        query = urllib.parse.urlencode({"topic": topic, "limit": 1})
        document = http("GET", f"{url}/admin/georep/v1/stats?{query}")
        topics: list[dict[str, Any]] = document["subscriptionSync"]["topics"]
        for synced in topics:
            if synced["topic"] == topic:
                return synced
        return {}

    on_a = sync_of(gateways["A"])
    source = (on_a.get("subscriptions", {}).get("s") or {}).get("source") or {}
    on_b = sync_of(gateways["B"]).get("subscriptions", {}).get("s") or {}
    applied = (on_b.get("applied") or {}).get("A") or {}
    # The read that wrote the marker began at lastWrittenAt; B dates the marker by
    # when it was written (syncLagMs runs from there to the apply).
    told_at, read_at = on_a.get("toldAt"), source.get("lastWrittenAt")
    lag_ms, applied_at = applied.get("syncLagMs"), applied.get("appliedAt")
    if told_at is None or read_at is None or lag_ms is None or applied_at is None:
        return None
    return [told_at, read_at, applied_at - lag_ms / 1000, applied_at]


def lag_summary(lags: list[float], sample: int) -> dict[str, Any]:
    return {
        "samples": sample,
        "synced": len(lags),
        "p50": round(percentile(lags, 0.5), 1) if lags else None,
        "p99": round(percentile(lags, 0.99), 1) if lags else None,
    }


async def pulsar_run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    from pulsar_tools.admin import PulsarAdmin, link_geo_replication
    from pulsar_tools.standalone import (
        PULSAR_VERSION,
        PulsarStandalone,
        StandaloneSpec,
        resolve_jars,
    )

    bases = layout(args)
    topics = leaves(bases)
    namespaces = sorted({base.rsplit("/", 1)[0].removeprefix("persistent://") for base in bases})
    # Pulsar's replicated subscriptions, the anchor: a namespace of its own, same shape.
    anchor_bases = {
        base.replace(f"{TENANT}/ns", f"{TENANT}/pulsar-ns"): count for base, count in bases.items()
    }
    anchor_namespaces = sorted(
        {base.rsplit("/", 1)[0].removeprefix("persistent://") for base in anchor_bases}
    )
    lib = await asyncio.to_thread(resolve_jars, say=progress)
    pair = [PulsarStandalone(StandaloneSpec(n, root / f"pulsar-{n}"), lib) for n in "AB"]
    gateways: list[ManagedProcess] = []
    try:
        for standalone in pair:
            progress(f"starting Pulsar standalone {standalone.name}")
            await asyncio.to_thread(standalone.start)
        a, b = pair
        replicate = args.deployment == "replicate"
        for namespace in anchor_namespaces + ([] if replicate else namespaces):
            await asyncio.to_thread(link_geo_replication, pair, *namespace.split("/"))
        if replicate:  # the gateway copies; the receiving broker deduplicates its writes
            for cluster in pair:
                cluster_admin = PulsarAdmin(cluster.admin_url)
                for namespace in namespaces:
                    await asyncio.to_thread(cluster_admin.ensure_namespace, *namespace.split("/"))
                    await asyncio.to_thread(
                        cluster_admin.request,
                        "POST",
                        f"/admin/v2/namespaces/{namespace}/deduplication",
                        True,
                    )
        admin = PulsarAdmin(a.admin_url)
        for base, partitions in {**bases, **anchor_bases}.items():
            path = base.removeprefix("persistent://")
            await asyncio.to_thread(
                admin.request, "PUT", f"/admin/v2/persistent/{path}/partitions", partitions
            )
        progress(f"producing one message on each of {2 * len(topics)} partitions")
        await produce_one_each(a.service_url, topics + leaves(anchor_bases), "first")
        ends = {
            cluster.name: {
                "name": cluster.name,
                "kind": "pulsar",
                "url": cluster.service_url,
                "admin": cluster.admin_url,
            }
            for cluster in pair
        }
        started = time.monotonic()
        urls = {}
        for local, remote in (("A", "B"), ("B", "A")):
            policy = replicate and local == "A"
            scan = (f"pulsar_scan_interval_s = {args.scan_interval}",) if args.scan_interval else ()
            config = gateway_toml(
                root, ends[local], ends[remote], namespaces, policy=policy, sync_extra=scan
            )
            process, url = await start_gateway(root, config, local)
            gateways.append(process)
            urls[local] = url
        await wait_all(urls["A"], len(topics), 1, "start", replicate=replicate)
        start_s = time.monotonic() - started
        # The idle figures start once the gateways' start-up work is done: each looks at
        # every topic it first sees once (stray subscriptions), a paced request each.
        await wait_swept(urls, "start")
        swept_s = time.monotonic() - started
        progress(f"settling for {args.settle:.0f} s")
        await asyncio.sleep(args.settle)

        async def counters() -> dict[str, Any]:
            stats = {}
            for name, url in urls.items():
                path = f"{url}/admin/georep/v1/stats?limit=0"
                stats[name] = await asyncio.to_thread(http, "GET", path)
            counted = {
                f"gateway {name} to {cluster}": float(count)
                for name, document in stats.items()
                for cluster, count in document["adminRequestsSent"].items()
            }
            for name, document in stats.items():  # what they are, where any were sent
                for cluster, kinds in document.get("adminRequestsByKind", {}).items():
                    for kind, count in kinds.items():
                        counted[f"gateway {name} to {cluster}: {kind}"] = float(count)
            return counted

        pids = {"pulsar A": a.pid, "pulsar B": b.pid}
        pids.update({f"gateway {name}": p.pid for name, p in zip("AB", gateways, strict=True)})
        progress(f"idle for {args.idle_seconds:.0f} s")
        idle = await idle_costs(pids, args.idle_seconds, counters)
        picks = random.Random(7).sample(range(len(topics)), min(args.sample, len(topics)))
        sampling_began = time.monotonic()
        georep_lags = await pulsar_lag(
            a.service_url,
            b.service_url,
            b.admin_url,
            [topics[i] for i in picks],
            False,
            "georep",
            gateways=urls,
        )
        georep_sampling_s = time.monotonic() - sampling_began
        anchor_topics = leaves(anchor_bases)
        pulsar_lags = await pulsar_lag(
            a.service_url,
            b.service_url,
            b.admin_url,
            [anchor_topics[i] for i in picks],
            True,
            "pulsar",
        )
        lag: dict[str, Any] = {}
        for kind in ("fresh", "old"):
            ours = lag_summary(georep_lags[kind], len(picks))
            theirs = lag_summary(pulsar_lags[kind], len(picks))
            ratio = None
            if ours["p99"] and theirs["p99"]:
                ratio = round(ours["p99"] / theirs["p99"], 2)
            lag[kind] = {
                "georep": ours,
                "pulsar_replicated_subscriptions": theirs,
                "p99_ratio_georep_to_pulsar": ratio,
            }
        lag["fresh"]["georep_stages"] = {
            stage: lag_summary(georep_lags[stage], len(picks)) for stage in LAG_STAGES
        }
        # How each gateway found its cluster's changes over the whole run: metrics pages
        # read, and the hot topics read alone between them (the samples made them hot).
        finding = {name: gateway_stats_changes(url) for name, url in urls.items()}
        return {
            "pulsar": PULSAR_VERSION,
            "deployment": (
                "replicate and sync (the gateway copies the data)"
                if replicate
                else "sync only (Pulsar's geo-replication carries the data)"
            ),
            "partitions": len(topics),
            "topics": len(bases),
            "namespaces": len(namespaces),
            "gateway_scan_interval_s": args.scan_interval or limits.sync_pulsar_scan_interval_s,
            "start_until_all_synced_s": round(start_s, 1),
            "start_until_every_topic_swept_s": round(swept_s, 1),
            "idle": idle,
            "sync_lag_ms": lag,
            "change_finding": finding,
            "georep_sampling_s": round(georep_sampling_s, 1),
        }
    finally:
        for process in gateways:
            await process.terminate()
        for standalone in pair:
            await asyncio.to_thread(standalone.stop)


# --- main ------------------------------------------------------------------------------
async def main(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    result: dict[str, Any] = {
        "bench": "scale",
        "target": args.target,
        "machine": machine(),
    }
    if args.target == "georep":
        result["georep"] = await georep_run(args, root)
    else:
        result["pulsar"] = await pulsar_run(args, root)
    progress("done")
    print(file=sys.stderr)
    return result


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=("georep", "pulsar"), default="georep")
    parser.add_argument(
        "--deployment",
        choices=("sync-only", "replicate"),
        default="sync-only",
        help="beside Pulsar: who copies the data (Pulsar's geo-replication, or the gateway)",
    )
    parser.add_argument(
        "--scan-interval",
        type=float,
        default=None,
        help="beside Pulsar: the gateways' pulsar_scan_interval_s (default: theirs)",
    )
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--partitions-per-topic", type=int, default=4)
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument("--idle-seconds", type=float, default=30.0)
    parser.add_argument("--sample", type=int, default=20)
    parser.add_argument("--fsync", action="store_true", help="bookies sync their journals")
    add_scratch_arguments(parser)
    run_in_scratch(parser.parse_args(), main)


if __name__ == "__main__":
    cli()
