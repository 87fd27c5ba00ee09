"""Subscription sync benchmark: how soon an acknowledgement on A shows on B, and what sync
costs replication. Two ``georep cluster`` processes (A and B, three in-process bookies
each, fsync on unless ``--no-fsync``) and two ``georep gateway`` processes, A↔B both
ways, with a ``[subscription_sync]`` table: mode ``full``, everything else at its
default (snapshot every 1 s at most, poll every 0.2 s) unless ``--snapshot-interval`` /
``--poll-interval`` say otherwise. 1 KiB messages. Prints one JSON object.

- **Sync lag** (namespace ``bench/sync-lag``). A producer process publishes ``--rate``
  msgs/s on A for ``--seconds`` (bench/replication.py's lag producer: every 10 ms it
  sends that tick's messages, which batch into one entry, ~50 messages at 5,000 msgs/s).
  A consumer process on A (Shared, ``replicate_subscription_state_enabled=True``)
  receives and acknowledges every message individually, recording each message id
  and when ``acknowledge()`` was called. Two monitor processes poll the subscription's
  ``GET .../sync-state`` every ``--monitor-interval`` s (0.05), one on A and one on B,
  and keep each change of the mark-delete position (MDP) and acknowledged ranges with
  the time its answer arrived. Once all is acknowledged, replicated and synced (or
  ``--drain`` s have passed) B's entries are read as stored: each copy carries its
  origin position on A (``georep.origin.position``), so each B position maps to an A
  entry. The unit is the **entry**: without batch-index acks the client sends an
  entry's acknowledgement when the last message of its batch is acknowledged, so an
  entry's ack time is that of its last message. For every entry acknowledged after
  ``--warmup`` s::

      lag_ms     = first poll answer on B showing its copy acknowledged - ack time on A
      a_visible  = first poll answer on A showing it acknowledged      - ack time on A

  ``lag_ms`` is the headline (ack → same state on B). ``a_visible`` is the part before
  the gateway can see it (the client's ack grouping, 100 ms in pulsar-client, and
  A's broker); their difference is the gateways' part (A's poll, the marker's write
  and replication, B's read and apply). Both are upper bounds by up to one monitor
  interval plus one request; the achieved poll intervals are in the output
  (``monitor``). Entries acknowledged on A but never seen acknowledged on B are
  counted (``never_seen_on_b``; 0 expected after the drain). The gateway's own
  ``syncLagMs`` (marker written on A → applied on B) is sampled from B's gateway
  stats every 0.5 s and reported beside it (``gateway_sync_lag_ms``), and each process's
  CPU share over the publishing time (``cpu_share``).

- **Overhead on replication throughput** (namespaces ``bench/sync-off`` and
  ``bench/sync-full``, one per mode, through ``[subscription_sync.namespaces]``
  overrides, so one pair of gateways serves both and both topics are synced the same
  way from their creation). As bench/replication.py's saturation: ``--messages``
  messages published on A (batched, 5 ms delay), then a consumer of a replicated
  subscription starts on A, acknowledging individually at ``--rate`` msgs/s, and a
  topic policy on A's gateway replicates the topic to B (each round its own topic).
  Throughput is what B acknowledged per second (A's gateway's replicator stats, polled
  every 0.1 s) from the first receipt to the last, with each process's CPU share over
  that time and the two gateways' CPU seconds together (``gateways_cpu_s``: where
  sync's cost can be seen, the throughput varying more between runs than between
  modes). ``--rounds`` rounds, the order of the two modes alternating. ``off`` still
  runs each gateway's topic reader and poller (what differs is that A writes no
  snapshot and no ack-ranges marker, and so B applies nothing). The markers A writes
  during the catch-up queue behind the backlog (markers flow with the data), so B
  applies them only as the catch-up ends: the throughput figure holds A's polling and
  marker writing, B's reading of every copy, and the snapshots' requests; not B's
  applies, whose cost the lag scenario shows.

    python bench/subsync.py [--rate 5000] [--seconds 30] [--messages 500000] [--rounds 2]
                            [--scenarios lag,overhead] [--no-fsync] [--json-only]

Progress goes to stderr (none with ``--json-only``); only the JSON goes to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import itertools
import json
import multiprocessing
import statistics
import sys
import time
import urllib.error
import urllib.parse
from http.client import HTTPConnection, HTTPException
from pathlib import Path
from typing import TYPE_CHECKING, Any

import harness
from harness import (
    SIZE,
    Cluster,
    add_scratch_arguments,
    cpu_seconds,
    cpu_shares,
    http,
    machine,
    percentile,
    publish_at_rate,
    publish_backlog,
    quiet_logger,
    replicator_of,
    run_in_scratch,
    start_clusters,
)

from georep import limits
from georep.client.consumer import InitialPosition
from georep.client.link import PulsarLink
from georep.domain.position import Position
from georep.replicator.origin import origin_of
from georep.runtime.awaiting import within
from georep.runtime.processes import ManagedProcess, georep_command

if TYPE_CHECKING:
    from multiprocessing.sharedctypes import Synchronized
    from multiprocessing.synchronize import Event

#: A sync-state poll's changes: (when, MDP, ranges).
Changes = list[tuple[float, Position, tuple[tuple[Position, Position], ...]]]

NAMESPACE_LAG = "bench/sync-lag"
NAMESPACE_OFF = "bench/sync-off"
NAMESPACE_FULL = "bench/sync-full"
SUBSCRIPTION = "bench"


_quiet = False


def progress(text: str) -> None:
    if not _quiet:
        harness.progress(text)


# --- child processes (pulsar-client blocks; each runs in its own process) --------------------
def consume_and_ack(
    service_url: str,
    topic: str,
    rate: int,
    record: bool,
    ready: Event,
    stop: Event,
    release: Event,
    acked: Synchronized[int],
    result: multiprocessing.Queue[dict[Position, float]],
) -> None:
    """Receive and acknowledge every message individually (at most ``rate`` msgs/s if
    ``rate``) until ``stop``; then put {(ledger, entry): time of its last ack} (or {})
    and keep the subscription connected, its consumers being what makes A the source of
    its state, until ``release``."""
    import pulsar

    client = pulsar.Client(service_url, operation_timeout_seconds=60, logger=quiet_logger())
    consumer = client.subscribe(
        topic,
        SUBSCRIPTION,
        consumer_type=pulsar.ConsumerType.Shared,
        replicate_subscription_state_enabled=True,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    ready.set()
    acked_at: dict[Position, float] = {}
    count = 0
    started = time.monotonic()
    while not stop.is_set():
        if rate:
            ahead_s = count / rate - (time.monotonic() - started)
            if ahead_s > 0:
                time.sleep(ahead_s)
        try:
            message = consumer.receive(timeout_millis=100)
        except pulsar.Timeout:
            continue
        message_id = message.message_id()
        now = time.time()
        consumer.acknowledge(message)
        if record:
            acked_at[Position(message_id.ledger_id(), message_id.entry_id())] = now
        count += 1
        if count % 100 == 0:
            acked.value = count
    acked.value = count
    result.put(acked_at)
    release.wait(600)
    client.close()


def watch_sync_state(
    admin_url: str,
    topic: str,
    interval_s: float,
    stop: Event,
    result: multiprocessing.Queue[dict[str, Any]],
) -> None:
    """Poll the subscription's sync-state every ``interval_s`` until ``stop``; put each
    change of (MDP, ranges) with the time its answer arrived, and the poll times."""
    address = urllib.parse.urlsplit(admin_url)
    path = f"/admin/georep/v1/persistent/{topic.removeprefix('persistent://')}/sync-state"
    assert address.hostname is not None, admin_url
    connection = HTTPConnection(address.hostname, address.port, timeout=10)
    changes: Changes = []
    answered: list[float] = []
    failures = 0
    truncated = False
    last = None
    while not stop.is_set():
        began = time.time()
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
        except (OSError, HTTPException):
            connection.close()
            failures += 1
            time.sleep(interval_s)
            continue
        now = time.time()
        answered.append(now)
        state = None
        if response.status == 200:
            state = json.loads(body)["subscriptions"].get(SUBSCRIPTION)
        if state is not None:
            mark_delete = _position(state["markDelete"])
            ranges = tuple((_position(r["first"]), _position(r["last"])) for r in state["ranges"])
            truncated = truncated or state["rangesTruncated"]
            if (mark_delete, ranges) != last:
                last = (mark_delete, ranges)
                changes.append((now, mark_delete, ranges))
        time.sleep(max(0.0, began + interval_s - time.time()))
    connection.close()
    result.put(
        {"changes": changes, "answered": answered, "failures": failures, "truncated": truncated}
    )


def _position(document: dict[str, Any]) -> Position:
    return Position(document["ledgerId"], document["entryId"])


# --- analysis ---------------------------------------------------------------------------------
def first_acknowledged(positions: list[Position], changes: Changes) -> list[float | None]:
    """For each of ``positions`` (sorted), the time of the first change showing it
    acknowledged (at or below the MDP, or inside a range); None if none did.

    Acknowledged only grows, so each position is settled once: ``after[i]`` points at
    the next position not yet seen (path-halving union-find), which keeps the whole
    pass near-linear in positions plus ranges however long a range stays. Example:
    positions [1:0, 1:1, 1:2], changes [(t1, MDP 1:0, []), (t2, MDP 1:0, [(1:2, 1:2)]),
    (t3, MDP 1:2, [])] give [t1, t3, t2].
    """
    count = len(positions)
    seen: list[float | None] = [None] * count
    after = list(range(count + 1))

    def next_unseen(i: int) -> int:
        while after[i] != i:
            after[i] = after[after[i]]
            i = after[i]
        return i

    def settle(start: int, last: Position, when: float) -> None:
        i = next_unseen(start)
        while i < count and positions[i] <= last:
            seen[i] = when
            after[i] = i + 1
            i = next_unseen(i + 1)

    for when, mark_delete, ranges in changes:
        settle(0, mark_delete, when)
        for first, last in ranges:
            settle(bisect.bisect_left(positions, first), last, when)
    return seen


def distribution(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    if not ordered:
        return {"count": 0, "p50": None, "p99": None, "max": None}
    return {
        "count": len(ordered),
        "p50": round(percentile(ordered, 0.50), 1),
        "p99": round(percentile(ordered, 0.99), 1),
        "max": round(ordered[-1], 1),
    }


def poll_intervals(answered: list[float]) -> dict[str, Any]:
    gaps = sorted((b - a) * 1000 for a, b in itertools.pairwise(answered))
    return {
        "polls": len(answered),
        "interval_ms_mean": round(sum(gaps) / len(gaps), 1) if gaps else None,
        "interval_ms_p99": round(percentile(gaps, 0.99), 1) if gaps else None,
    }


async def copies_on(
    service_url: str, topic: str, origin_cluster: str, quiet_s: float
) -> dict[Position, Position]:
    """origin position on ``origin_cluster`` -> position of its copy, for every entry of
    ``topic`` as stored (read until none arrives for ``quiet_s``)."""
    link = PulsarLink(service_url)
    copies: dict[Position, Position] = {}
    try:
        consumer = await link.subscribe(
            topic,
            f"bench-read-{time.monotonic_ns()}",
            durable=False,
            initial_position=InitialPosition.EARLIEST,
        )
        while True:
            try:
                entry = await within(consumer.receive(), quiet_s)
            except TimeoutError:
                return copies
            origin = origin_of(entry.metadata)
            if origin is not None and origin.cluster == origin_cluster:
                copies[origin.position] = entry.position
            consumer.ack_cumulative(entry.position)  # keeps the broker dispatching
    finally:
        await link.close()


# --- the scenarios ------------------------------------------------------------------------------
def sync_stats_of(gateway_url: str, topic: str) -> dict[str, Any] | None:
    stats = http("GET", f"{gateway_url}/admin/georep/v1/stats")
    found: list[dict[str, Any]] = [
        t for t in stats["subscriptionSync"]["topics"] if t["topic"] == topic
    ]
    return found[0] if found else None


def sync_state_of(admin_url: str, topic: str) -> dict[str, Any] | None:
    path = topic.removeprefix("persistent://")
    try:
        document = http("GET", f"{admin_url}/admin/georep/v1/persistent/{path}/sync-state")
    except urllib.error.HTTPError:
        return None
    state: dict[str, Any] | None = document["subscriptions"].get(SUBSCRIPTION)
    return state


async def start_consumer(
    url: str, topic: str, rate: int, record: bool
) -> tuple[
    multiprocessing.Process,
    Event,
    Event,
    Synchronized[int],
    multiprocessing.Queue[dict[Position, float]],
]:
    """A consume_and_ack process, subscribed: (process, stop, release, acked count,
    acked queue)."""
    ready, stop, release = multiprocessing.Event(), multiprocessing.Event(), multiprocessing.Event()
    acked = multiprocessing.Value("q", 0)
    acked_queue: multiprocessing.Queue[dict[Position, float]] = multiprocessing.Queue()
    consumer = multiprocessing.Process(
        daemon=True,
        target=consume_and_ack,
        args=(url, topic, rate, record, ready, stop, release, acked, acked_queue),
    )
    consumer.start()
    await asyncio.to_thread(ready.wait, 60)
    return consumer, stop, release, acked, acked_queue


async def lag(world: World, args: argparse.Namespace) -> dict[str, Any]:
    a, b = world.a, world.b
    topic = f"persistent://{NAMESPACE_LAG}/steady"
    consumer, stop, release, acked, acked_queue = await start_consumer(a.url, topic, 0, True)
    watch_stop = multiprocessing.Event()
    watch_queues: dict[str, multiprocessing.Queue[dict[str, Any]]] = {
        "A": multiprocessing.Queue(),
        "B": multiprocessing.Queue(),
    }
    watchers = [
        multiprocessing.Process(
            daemon=True,
            target=watch_sync_state,
            args=(cluster.admin_url, topic, args.monitor_interval, watch_stop, watch_queues[name]),
        )
        for name, cluster in (("A", a), ("B", b))
    ]
    for watcher in watchers:
        watcher.start()
    sent_queue: multiprocessing.Queue[tuple[int, float]] = multiprocessing.Queue()
    producer = multiprocessing.Process(
        daemon=True,
        target=publish_at_rate,
        args=(a.url, topic, args.rate, args.seconds, sent_queue),
    )
    assert consumer.pid is not None  # started
    pids = {**world.pids, "consumer": consumer.pid}
    cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    started = time.time()
    producer.start()
    gateway_lags: list[float] = []
    last_applies = 0

    async def sample_gateway_lag() -> dict[str, Any] | None:
        nonlocal last_applies
        stats = await asyncio.to_thread(sync_stats_of, world.gateway_b, topic)
        applied = (stats or {}).get("subscriptions", {}).get(SUBSCRIPTION, {}).get("applied", {})
        from_a: dict[str, Any] | None = applied.get("A")
        if from_a and from_a["applies"] > last_applies and from_a["syncLagMs"] is not None:
            last_applies = from_a["applies"]
            gateway_lags.append(from_a["syncLagMs"])
        return from_a

    while producer.is_alive():
        from_a = await sample_gateway_lag()
        progress(
            f"lag: {acked.value:,} acked on A, {last_applies} applies on B, gateway sync lag"
            f" {from_a['syncLagMs'] if from_a else '?'} ms"
        )
        await asyncio.sleep(0.5)
    sent, publish_s = await asyncio.to_thread(sent_queue.get, True, 120)
    shares = cpu_shares(pids, cpu_before, time.time() - started)
    await asyncio.to_thread(producer.join, 60)

    # drain: everything acknowledged on A, replicated, and B's MDP past the last copy
    deadline = time.monotonic() + args.drain
    while acked.value < sent and time.monotonic() < deadline:
        progress(f"drain: {acked.value:,} / {sent:,} acked on A")
        await sample_gateway_lag()
        await asyncio.sleep(0.5)
    while time.monotonic() < deadline:
        replicator = await asyncio.to_thread(replicator_of, world.gateway_a, topic)
        if (
            replicator
            and not replicator["replicationBacklog"]
            and not replicator["bufferedEntries"]
        ):
            break
        progress("drain: replicating the last entries")
        await asyncio.sleep(0.5)
    progress("drain: reading B's copies")
    copies = await copies_on(b.url, topic, "A", quiet_s=1.5)
    last_copy = max(copies.values()) if copies else None
    while last_copy is not None and time.monotonic() < deadline:
        state = await asyncio.to_thread(sync_state_of, b.admin_url, topic)
        await sample_gateway_lag()
        if state is not None and _position(state["markDelete"]) >= last_copy:
            break
        progress(f"drain: B's subscription at {state and state['markDelete']}, last {last_copy}")
        await asyncio.sleep(0.5)
    drained = time.time()
    stop.set()
    watch_stop.set()
    acked_at: dict[Position, float] = await asyncio.to_thread(acked_queue.get, True, 120)
    watched = {
        name: await asyncio.to_thread(queue.get, True, 120) for name, queue in watch_queues.items()
    }
    for watcher in watchers:
        await asyncio.to_thread(watcher.join, 60)
    sync_stats = await asyncio.to_thread(sync_stats_of, world.gateway_a, topic)
    sync_stats_b = await asyncio.to_thread(sync_stats_of, world.gateway_b, topic)
    final_states = {
        name: await asyncio.to_thread(sync_state_of, cluster.admin_url, topic)
        for name, cluster in (("A", a), ("B", b))
    }
    release.set()
    await asyncio.to_thread(consumer.join, 60)

    # analysis, per A entry acknowledged after the warm-up
    entries_a = sorted(acked_at)
    seen_a = dict(
        zip(entries_a, first_acknowledged(entries_a, watched["A"]["changes"]), strict=True)
    )
    on_b = sorted(copies[e] for e in entries_a if e in copies)
    seen_b_at = dict(zip(on_b, first_acknowledged(on_b, watched["B"]["changes"]), strict=True))
    after_warmup = started + args.warmup
    lags, a_visible, gateways_part = [], [], []
    never_on_b = not_copied = 0
    for entry in entries_a:
        ack = acked_at[entry]
        copy = copies.get(entry)
        seen_b = seen_b_at.get(copy) if copy is not None else None
        if copy is None:
            not_copied += 1
        elif seen_b is None:
            never_on_b += 1
        if ack < after_warmup:
            continue
        if seen_b is not None:
            lags.append((seen_b - ack) * 1000)
        seen_on_a = seen_a[entry]
        if seen_on_a is not None:
            a_visible.append((seen_on_a - ack) * 1000)
            if seen_b is not None:
                gateways_part.append((seen_b - seen_on_a) * 1000)
    source = (sync_stats or {}).get("subscriptions", {}).get(SUBSCRIPTION, {}).get("source", {})
    return {
        "rate_msgs_per_s": args.rate,
        "achieved_publish_msgs_per_s": round(sent / publish_s),
        "seconds": args.seconds,
        "warmup_s": args.warmup,
        "published": sent,
        "acked_on_a": acked.value,
        "entries_acked_on_a": len(entries_a),
        "messages_per_entry": round(acked.value / len(entries_a), 2) if entries_a else None,
        "never_seen_on_b": never_on_b,
        "not_replicated": not_copied,
        "drain_s": round(drained - started - publish_s, 1),
        "cpu_share": shares,
        "lag_ms": distribution(lags),
        "a_visible_ms": distribution(a_visible),
        "gateways_part_ms": distribution(gateways_part),
        "gateway_sync_lag_ms": {**distribution(gateway_lags), "applies": last_applies},
        "markers_written_on_a": (sync_stats or {}).get("markersWritten"),
        "ack_ranges_written_on_a": source.get("ackRangesWritten"),
        "ack_ranges_read_on_b": (sync_stats_b or {})
        .get("markersRead", {})
        .get("SUBSCRIPTION_ACK_RANGES"),
        "snapshots_on_a": (sync_stats or {}).get("snapshots"),
        "final": {
            "last_copy_on_b": str(last_copy) if last_copy else None,
            "mark_delete": {
                name: state and "{ledgerId}:{entryId}".format(**state["markDelete"])
                for name, state in final_states.items()
            },
            "ranges": {
                name: state and len(state["ranges"]) for name, state in final_states.items()
            },
            "source_on_a": source,
            "applied_on_b": (sync_stats_b or {})
            .get("subscriptions", {})
            .get(SUBSCRIPTION, {})
            .get("applied", {})
            .get("A"),
            "apply_failures_on_b": (sync_stats_b or {}).get("applyFailures"),
            "last_error_on_b": (sync_stats_b or {}).get("lastError"),
        },
        "monitor": {
            name: {
                **poll_intervals(watched[name]["answered"]),
                "failures": watched[name]["failures"],
                "ranges_truncated": watched[name]["truncated"],
            }
            for name in ("A", "B")
        },
    }


async def overhead(
    world: World, mode: str, namespace: str, round_index: int, args: argparse.Namespace
) -> dict[str, Any]:
    """One catch-up of ``--messages`` with a replicated subscription consumed on A. Each
    round has its own topic (a fresh backlog and subscription), replicated by a topic
    policy set once its backlog is there."""
    a = world.a
    name = f"backlog-{round_index}"
    topic = f"persistent://{namespace}/{name}"
    progress(f"overhead ({mode}): publishing {args.messages:,} messages on A")
    process = multiprocessing.Process(
        daemon=True, target=publish_backlog, args=(a.url, topic, args.messages, True)
    )
    process.start()
    await asyncio.to_thread(process.join)
    consumer, stop, release, acked, acked_queue = await start_consumer(
        a.url, topic, args.rate, False
    )
    assert consumer.pid is not None  # started
    pids = {**world.pids, "consumer": consumer.pid}
    http(
        "PUT",
        f"{world.gateway_a}/admin/georep/v1/persistent/{namespace}/{name}/replication",
        {"clusters": ["B"]},
    )
    first = None
    cpu_before: dict[str, float] = {}
    while True:
        stats = await asyncio.to_thread(replicator_of, world.gateway_a, topic)
        out = stats["msgOutCounter"] if stats else 0
        now = time.monotonic()
        if out and first is None:
            first = (now, out, acked.value)
            cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        progress(f"overhead ({mode}): {out:,} / {args.messages:,} replicated")
        if out >= args.messages:
            break
        await asyncio.sleep(0.1)
    assert first is not None and stats is not None  # replicated: the loop saw it start
    elapsed = now - first[0]
    shares = cpu_shares(pids, cpu_before, elapsed)
    gateways_cpu_s = sum(
        cpu_seconds(pids[name]) - cpu_before[name] for name in ("gateway_a", "gateway_b")
    )
    acked_during = acked.value - first[2]
    stop.set()
    await asyncio.to_thread(acked_queue.get, True, 60)
    release.set()
    await asyncio.to_thread(consumer.join, 60)
    rate = (out - first[1]) / elapsed if elapsed > 0 else float("nan")
    sync_a = await asyncio.to_thread(sync_stats_of, world.gateway_a, topic) or {}
    return {
        "mode": mode,
        "messages": args.messages,
        "entries": stats["entriesOutCounter"],
        "msgs_per_s": round(rate),
        "seconds": round(elapsed, 2),
        "acked_on_a_during": acked_during,
        "errors": stats["errorsCounter"],
        "markers_written_on_a": sync_a.get("markersWritten"),
        "cpu_share": shares,
        "gateways_cpu_s": round(gateways_cpu_s, 2),
    }


# --- the world ----------------------------------------------------------------------------------
class World:
    """Clusters A and B and a gateway beside each; urls and the pids to measure."""

    def __init__(self) -> None:
        self.processes: list[ManagedProcess] = []
        self.a: Cluster
        self.b: Cluster
        self.gateway_a = self.gateway_b = ""
        self.pids: dict[str, int] = {}

    async def start(self, root: Path, args: argparse.Namespace) -> World:
        self.a, self.b = await start_clusters(
            root, args.no_fsync, (NAMESPACE_LAG, NAMESPACE_OFF, NAMESPACE_FULL), self.processes
        )
        clusters = {"A": self.a, "B": self.b}
        gateways = {}
        for local, remote in (("A", "B"), ("B", "A")):
            # B replicates every bench namespace back to A from the start; A replicates
            # the lag namespace from the start, the others' topics once their backlog is
            # there (overhead()).
            seeded = [NAMESPACE_LAG]
            if local == "B":
                seeded += [NAMESPACE_OFF, NAMESPACE_FULL]
            config = root / f"gateway-{local}.toml"
            config.write_text(
                gateway_toml(root, clusters[local], local, clusters[remote], remote, seeded, args)
            )
            gateway = ManagedProcess(
                georep_command("gateway", "--config", str(config)),
                "GATEWAY_READY",
                log_path=root / f"gateway-{local}.log",
            )
            gateways[local] = (await gateway.start(), gateway.pid)
            self.processes.append(gateway)
        (self.gateway_a, gateway_a_pid), (self.gateway_b, gateway_b_pid) = (
            gateways["A"],
            gateways["B"],
        )
        self.pids = {
            "gateway_a": gateway_a_pid,
            "gateway_b": gateway_b_pid,
            "cluster_a": self.a.process.pid,
            "cluster_b": self.b.process.pid,
        }
        return self

    async def stop(self) -> None:
        for process in reversed(self.processes):
            await process.terminate()


def gateway_toml(
    root: Path,
    local: Cluster,
    local_name: str,
    remote: Cluster,
    remote_name: str,
    seeded: list[str],
    args: argparse.Namespace,
) -> str:
    sync = ['mode = "full"']
    if args.snapshot_interval is not None:
        sync.append(f"snapshot_interval_s = {args.snapshot_interval}")
    if args.poll_interval is not None:
        sync.append(f"poll_interval_s = {args.poll_interval}")
    lines = [
        "[gateway]",
        'listen = "127.0.0.1:0"',
        f'metadata = "sqlite:///{root / f"gateway-{local_name}.db"}"',
        "discovery_interval_s = 0.5",
        "[local]",
        f'name = "{local_name}"',
        f'service_url = "{local.url}"',
        f'admin_url = "{local.admin_url}"',
        f"[remotes.{remote_name}]",
        f'service_url = "{remote.url}"',
        f'admin_url = "{remote.admin_url}"',
        "[policies.namespaces]",
        *(f'"{namespace}" = ["{remote_name}"]' for namespace in seeded),
        "[subscription_sync]",
        *sync,
        f'[subscription_sync.namespaces."{NAMESPACE_OFF}"]',
        'mode = "off"',
        f'[subscription_sync.namespaces."{NAMESPACE_FULL}"]',
        'mode = "full"',
    ]
    return "\n".join(lines) + "\n"


async def main(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    world = World()
    try:
        await world.start(root, args)
        result: dict[str, Any] = {
            "machine": machine(),
            "message_bytes": SIZE,
            "fsync": not args.no_fsync,
            "subscription_sync": {
                "mode": "full",
                "snapshot_interval_s": args.snapshot_interval or limits.snapshot_interval_s_default,
                "poll_interval_s": args.poll_interval or limits.sync_poll_interval_s_default,
            },
        }
        if "lag" in args.scenarios:
            result["lag"] = await lag(world, args)
        if "overhead" in args.scenarios:
            runs: dict[str, list[dict[str, Any]]] = {"off": [], "full": []}
            for round_index in range(args.rounds):
                order = ("off", "full") if round_index % 2 == 0 else ("full", "off")
                for mode in order:
                    namespace = NAMESPACE_OFF if mode == "off" else NAMESPACE_FULL
                    run = await overhead(world, mode, namespace, round_index, args)
                    runs[mode].append(run)
            off = statistics.median(r["msgs_per_s"] for r in runs["off"])
            full = statistics.median(r["msgs_per_s"] for r in runs["full"])
            result["overhead"] = {
                "consumer_rate_msgs_per_s": args.rate,
                "runs": runs,
                "msgs_per_s_median": {"off": round(off), "full": round(full)},
                "gateways_cpu_s_median": {
                    mode: round(statistics.median(r["gateways_cpu_s"] for r in mode_runs), 2)
                    for mode, mode_runs in runs.items()
                },
                "full_over_off": round(full / off, 3),
            }
        progress("done")
        if not _quiet:
            print(file=sys.stderr)
        return result
    finally:
        await world.stop()


def cli() -> None:
    global _quiet
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=5_000, help="msgs/s published and acked")
    parser.add_argument("--seconds", type=float, default=30.0, help="lag: publishing time")
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--drain", type=float, default=30.0, help="lag: longest wait after")
    parser.add_argument("--monitor-interval", type=float, default=0.05)
    parser.add_argument("--messages", type=int, default=500_000, help="overhead: backlog")
    parser.add_argument("--rounds", type=int, default=2, help="overhead: rounds of off+full")
    parser.add_argument("--snapshot-interval", type=float, default=None)
    parser.add_argument("--poll-interval", type=float, default=None)
    parser.add_argument(
        "--scenarios", default="lag,overhead", help="comma-separated: lag, overhead"
    )
    parser.add_argument("--no-fsync", action="store_true")
    parser.add_argument("--json-only", action="store_true", help="no progress on stderr")
    add_scratch_arguments(parser)
    args = parser.parse_args()
    args.scenarios = set(args.scenarios.split(","))
    _quiet = args.json_only
    run_in_scratch(args, main)


if __name__ == "__main__":
    cli()
