"""Two clusters' sync cores against in-memory topics, replication and cursors.

Cluster A and cluster B each hold one log (A in ledger 10, B in ledger 20) and one
subscription cursor. Replication copies each cluster's own entries (and the markers
origin.py routes) to the other, in order, as the replicators do; each core reads its
own log in order, as the gateway's reader does, and its markers are appended to its
own log. The states the cores ask to apply go into the other cursor as the broker's
sync endpoint would apply them. Whatever the interleaving, once everything is read
and replicated:

- in ``full`` mode B's subscription has acknowledged exactly the entries whose
  counterpart A acknowledged (copies of A's acked messages, and B's own messages whose
  copy on A was acked), and nothing else;
- in ``pulsar-compatible`` mode everything B acknowledged was acknowledged on A, and
  B's MDP follows A's as far as a completed snapshot allows.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from georep.domain.position import Position
from georep.replicator.origin import Verdict, origin_of, replicated_metadata, verdict
from georep.snapshots.markers import encode
from georep.subsync.core import Apply, SubscriptionState, SyncCore, WriteMarker
from georep.subsync.settings import NamespaceSync, SyncMode, SyncSettings
from georep.wire import pulsar_wire_pb2 as wire


class Cluster:
    def __init__(self, name: str, ledger: int, mode: SyncMode, peer: str) -> None:
        self.name = name
        self.ledger = ledger
        self.log: list[tuple[Position, wire.MessageMetadata, bytes]] = []
        self.read = 0
        self.replicated = 0  # entries of this log already offered to the peer
        self.acked: set[tuple[int, int]] = set()
        self.mark_delete = Position(ledger, -1)
        self.consumers = 0
        self.sequence = 0
        self.core = SyncCore(
            name,
            namespace_sync=NamespaceSync(mode=mode),
            settings=SyncSettings(snapshot_interval_s=1.0, snapshot_timeout_s=30.0),
            remotes=frozenset({peer}),
        )

    def append(self, metadata: wire.MessageMetadata, payload: bytes = b"x") -> Position:
        where = Position(self.ledger, len(self.log))
        self.log.append((where, metadata, payload))
        return where

    def produce(self, now: float) -> tuple[int, int]:
        self.sequence += 1
        return self.append(
            wire.MessageMetadata(
                producer_name="app", sequence_id=self.sequence, publish_time=int(now * 1000)
            )
        )

    def write(self, marker: WriteMarker, now: float) -> None:
        self.sequence += 1
        metadata = wire.MessageMetadata(
            producer_name="georep.sync." + self.name,
            sequence_id=self.sequence,
            publish_time=int(now * 1000),
            marker_type=int(marker.kind),
        )
        metadata.replicate_to.extend(marker.replicate_to)
        self.append(metadata, encode(marker.kind, marker.message))
        self.step_over_markers()

    def is_marker(self, where) -> bool:
        return self.log[where[1]][1].HasField("marker_type")

    def apply(self, action: Apply) -> None:
        if action.mark_delete is not None and action.mark_delete > self.mark_delete:
            top = min(action.mark_delete[1], len(self.log) - 1)
            self.acked.update((self.ledger, e) for e in range(top + 1))
        for first, last in action.ranges:
            for e in range(first[1], min(last[1], len(self.log) - 1) + 1):
                self.acked.add((self.ledger, e))
        self.step_over_markers()

    def ack(self, where) -> None:
        self.acked.add(where)
        self.step_over_markers()

    def step_over_markers(self) -> None:
        entry = self.mark_delete[1] + 1
        while entry < len(self.log) and (
            (self.ledger, entry) in self.acked or self.is_marker((self.ledger, entry))
        ):
            self.acked.add((self.ledger, entry))
            entry += 1
        self.mark_delete = Position(self.ledger, entry - 1)

    def state(self) -> dict[str, SubscriptionState]:
        above = sorted(p for p in self.acked if p > self.mark_delete)
        ranges: list = []
        for p in above:
            if ranges and ranges[-1][1][1] + 1 == p[1]:
                ranges[-1] = (ranges[-1][0], p)
            else:
                ranges.append((p, p))
        return {
            "s": SubscriptionState(
                mark_delete=self.mark_delete,
                ranges=tuple(ranges),
                consumers=self.consumers,
                replicated=True,
            )
        }

    def perform(self, actions, now: float) -> None:
        for action in actions:
            if isinstance(action, WriteMarker):
                self.write(action, now)
            else:
                self.apply(action)

    def read_all(self, now: float) -> None:
        while self.read < len(self.log):
            where, metadata, payload = self.log[self.read]
            self.read += 1
            self.perform(self.core.on_entry(where, metadata, payload, now), now)
        self.perform(self.core.drain_arrivals(), now)

    def replicate_to(self, peer: Cluster, count: int) -> None:
        while count > 0 and self.replicated < len(self.log):
            where, metadata, payload = self.log[self.replicated]
            self.replicated += 1
            if verdict(metadata, local_cluster=self.name, remote_cluster=peer.name) is (
                Verdict.REPLICATE
            ):
                copy = replicated_metadata(
                    metadata,
                    local_cluster=self.name,
                    position=where,
                    producer_name="georep.repl." + self.name,
                )
                peer.append(copy, payload)
                count -= 1


def counterpart(entry, source: Cluster, target: Cluster):
    """The entry of ``target`` holding the same message as ``entry`` of ``source``."""
    _, metadata, _ = source.log[entry[1]]
    origin = origin_of(metadata)
    for where, other, _ in target.log:
        if other.HasField("marker_type"):
            continue
        theirs = origin_of(other)
        if origin is None and theirs is not None and theirs.position == entry:
            return where
        if origin is not None and theirs is None and where == origin.position:
            return where
    return None


def run(seed: int, mode: SyncMode, steps: int, *, settle: bool = True) -> tuple[Cluster, Cluster]:
    rng = random.Random(seed)
    a = Cluster("A", 10, mode, "B")
    b = Cluster("B", 20, mode, "A")
    a.consumers = 1
    now = 1000.0
    for _ in range(steps):
        now += rng.choice([0.05, 0.3, 1.1])
        action = rng.random()
        if action < 0.35:
            a.produce(now)
        elif action < 0.45:
            b.produce(now)
        elif action < 0.7:
            unacked = [p for p, m, _ in a.log if p not in a.acked and not m.HasField("marker_type")]
            if unacked:
                a.ack(rng.choice(unacked))
        elif action < 0.8:
            a.replicate_to(b, rng.randint(1, 4))
            b.replicate_to(a, rng.randint(1, 4))
        elif action < 0.9:
            rng.choice([a, b]).read_all(now)
        else:
            poll_and_tick(a, b, now)
    for _ in range(8 if settle else 0):  # a few snapshot rounds, all replicated and read
        now += 1.1
        poll_and_tick(a, b, now)
        exchange(a, b, now)
    return a, b


def poll_and_tick(a: Cluster, b: Cluster, now: float) -> None:
    for cluster in (a, b):
        cluster.perform(cluster.core.on_state(cluster.state(), now), now)
        cluster.perform(cluster.core.tick(now, {"A": True, "B": True}), now)


def exchange(a: Cluster, b: Cluster, now: float) -> None:
    """Replicate everything both ways and read it, until nothing new comes."""
    for _ in range(3):
        a.replicate_to(b, 10**6)
        b.replicate_to(a, 10**6)
        a.read_all(now)
        b.read_all(now)


def data_entries(cluster: Cluster):
    return [p for p, m, _ in cluster.log if not m.HasField("marker_type")]


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32), st.integers(5, 120))
def test_full_mode_b_acknowledges_exactly_what_a_acknowledged(seed, steps):
    a, b = run(seed, SyncMode.FULL, steps)
    for entry in data_entries(b):
        on_a = counterpart(entry, b, a)
        if on_a is None:
            continue  # B's own message not replicated to A (cannot happen after settling)
        assert (entry in b.acked) == (on_a in a.acked), (entry, on_a)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32), st.integers(5, 120))
def test_pulsar_compatible_mode_never_acknowledges_what_a_did_not(seed, steps):
    a, b = run(seed, SyncMode.PULSAR_COMPATIBLE, steps)
    for entry in data_entries(b):
        if entry in b.acked:
            on_a = counterpart(entry, b, a)
            assert on_a is not None and on_a in a.acked, (entry, on_a)


def test_pulsar_compatible_mode_moves_b_with_a_in_order_consumption():
    a = Cluster("A", 10, SyncMode.PULSAR_COMPATIBLE, "B")
    b = Cluster("B", 20, SyncMode.PULSAR_COMPATIBLE, "A")
    a.consumers = 1
    now = 1000.0
    produced = [a.produce(now) for _ in range(20)]
    for round_ in range(6):
        now += 1.1
        for cluster in (a, b):
            cluster.perform(cluster.core.tick(now, {"A": True, "B": True}), now)
        exchange(a, b, now)
        if round_ == 2:
            for where in produced:
                a.ack(where)
            a.produce(now)  # something new, so that a snapshot is taken after the acks
        a.perform(a.core.on_state(a.state(), now), now)
    copies = [p for p in data_entries(b) if counterpart(p, b, a) in produced]
    assert copies and all(p in b.acked for p in copies)
    assert a.core.controller.stats.completed >= 1


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32), st.integers(5, 80))
def test_sync_goes_idle_once_nothing_changes(seed, steps):
    """Markers written here move the MDP over them; that alone must not write more."""
    a, b = run(seed, SyncMode.FULL, steps)
    now: float = 10**6
    for _ in range(3):  # let whatever is in flight settle
        now += 1.1
        poll_and_tick(a, b, now)
        exchange(a, b, now)
    sizes = (len(a.log), len(b.log))
    for _ in range(5):
        now += 1.1
        poll_and_tick(a, b, now)
        exchange(a, b, now)
    assert (len(a.log), len(b.log)) == sizes


def exposure_and_duplicates(seed: int, mode: SyncMode, steps: int) -> tuple[int, int]:
    """Stop a random run anywhere, read A's exposure towards B, then fail A: B's gateway
    reads and applies what B stores, and the duplicates are the messages A's state
    acknowledged whose copies B still holds unacknowledged."""
    a, b = run(seed, mode, steps, settle=False)
    now = 10**6
    a.perform(a.core.on_state(a.state(), now), now)
    acked_on_a = set(a.acked)
    while a.read < len(a.log):  # the exposure counts own markers once read back
        a.read_all(now)
    stored = Position(a.ledger, a.replicated - 1)
    figure = a.core.exposure(now, {"B": stored})["s"]["B"]
    assert figure is not None
    while b.read < len(b.log):  # A is gone; B's gateway applies what B stores
        b.read_all(now)
    duplicates = sum(
        1
        for entry in data_entries(b)
        if entry not in b.acked and counterpart(entry, b, a) in acked_on_a
    )
    return figure.messages, duplicates


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32), st.integers(5, 120))
def test_full_mode_exposure_is_what_a_failover_now_delivers_again(seed, steps):
    exposure, duplicates = exposure_and_duplicates(seed, SyncMode.FULL, steps)
    assert exposure == duplicates


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32), st.integers(5, 120))
def test_pulsar_compatible_exposure_bounds_what_a_failover_now_delivers_again(seed, steps):
    exposure, duplicates = exposure_and_duplicates(seed, SyncMode.PULSAR_COMPATIBLE, steps)
    assert exposure >= duplicates
