"""Subscription sync beside real Pulsar: markers out of band (a side topic), no snapshots,
origins from Pulsar's own replicator, state from ``internalStats`` / ``stats``, applies
as exact acknowledgements."""

from __future__ import annotations

import pytest

from georep.domain.position import Position
from georep.replicator.origin import PULSAR_SOURCE_POSITION_PROPERTY
from georep.snapshots.markers import MarkerKind, encode
from georep.subsync import pulsar_port, side_channel
from georep.subsync.core import Apply, SubscriptionState, SyncCore
from georep.subsync.settings import NamespaceSync, SyncSettings
from georep.wire import pulsar_wire_pb2 as wire


def core(name: str) -> SyncCore:
    return SyncCore(
        name,
        namespace_sync=NamespaceSync(),
        settings=SyncSettings(snapshot_interval_s=0.5),
        remotes=frozenset({"A", "B"} - {name}),
        in_band=False,
    )


def own_entry(core_: SyncCore, where: tuple[int, int]) -> None:
    metadata = wire.MessageMetadata(producer_name="app", sequence_id=where[1], publish_time=1)
    core_.on_entry(Position(*where), metadata, b"x", 0.0)


def pulsar_copy(core_: SyncCore, origin: tuple[int, int], where: tuple[int, int]) -> None:
    """A copy made by Pulsar's own replicator: replicated_from and the source position."""
    metadata = wire.MessageMetadata(
        producer_name="pulsar.repl.A", sequence_id=origin[1], publish_time=1
    )
    metadata.replicated_from = "A"
    metadata.properties.add(key=PULSAR_SOURCE_POSITION_PROPERTY, value=f"{origin[0]}:{origin[1]}")
    core_.on_entry(Position(*where), metadata, b"x", 0.0)


def test_acked_ranges_cross_on_the_side_and_map_onto_pulsars_copies():
    a, b = core("A"), core("B")
    for entry in range(10):
        own_entry(a, (3, entry))
        pulsar_copy(b, (3, entry), (8, entry + 2))  # B's topic starts with two markers
    # A: MDP 3:1, entries 3:4..3:6 acknowledged above it; 3:2, 3:3 and 3:7.. are not.
    state = SubscriptionState(
        mark_delete=Position(3, 1),
        ranges=((Position(3, 4), Position(3, 6)),),
        consumers=1,
        replicated=True,
    )
    written = a.on_state({"s": state}, 1.0)
    assert [w.kind for w in written] == [MarkerKind.SUBSCRIPTION_ACK_RANGES]
    assert a.tick(5.0, {"B": True}) == []  # out of band: never a snapshot
    payload = encode(written[0].kind, written[0].message)
    applies = b.on_side_marker(int(written[0].kind), payload, "A", 1000)
    assert len(applies) == 1 and isinstance(applies[0], Apply)
    covered = {
        (ledger, entry)
        for (ledger, first), (_, last) in applies[0].ranges
        for entry in range(first, last + 1)
    }
    assert covered == {(8, 2), (8, 3), (8, 6), (8, 7), (8, 8)}
    # Its own markers coming back, and snapshot kinds, change nothing.
    assert a.on_side_marker(int(written[0].kind), payload, "A", 1000) == []
    assert b.on_side_marker(int(MarkerKind.SNAPSHOT_REQUEST), b"", "A", 1000) == []
    # Out of band, how far B stores the side topic is not known: nor is the exposure.
    assert a.exposure(2.0, {"B": Position(3, 9)}) == {"s": {"B": None}}


def test_an_unchanged_state_is_written_again_after_the_resend_interval():
    a = core("A")
    own_entry(a, (3, 0))
    state = SubscriptionState(mark_delete=Position(3, 0), consumers=1, replicated=True)
    assert len(a.on_state({"s": state}, 1.0)) == 1
    assert a.on_state({"s": state}, 2.0) == []
    assert len(a.on_state({"s": state}, 1.0 + 61.0)) == 1


def test_pulsar_states_leave_out_readers_replicators_and_the_acknowledger():
    internal = {
        "cursors": {
            "app": {"markDeletePosition": "3:4", "individuallyDeletedMessages": "[(3:6..3:9]]"},
            "georep.sync": {"markDeletePosition": "3:9", "individuallyDeletedMessages": "[]"},
            "pulsar.repl.B": {"markDeletePosition": "3:9", "individuallyDeletedMessages": "[]"},
            "reader-1": {"markDeletePosition": "3:9", "individuallyDeletedMessages": "[]"},
            "broken": {"markDeletePosition": "x"},
        }
    }
    stats = {
        "subscriptions": {
            "app": {"isReplicated": False, "consumers": [{"consumerName": "georep-acknowledger"}]},
            "georep.sync": {"consumers": [{"consumerName": "g"}]},
            "broken": {"consumers": []},
        }
    }
    states = pulsar_port.pulsar_states(internal, stats)
    assert list(states) == ["app"]
    assert states["app"].consumers == 0  # the acknowledger is not an application
    assert states["app"].ranges == ((Position(3, 7), Position(3, 9)),)


def test_side_messages_name_their_topic_kind_and_source():
    metadata = wire.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    with pytest.raises(side_channel.SideMessageError):
        side_channel.side_properties(metadata)
    for key, value in (
        (side_channel.TOPIC_PROPERTY, "persistent://t/ns/x"),
        (side_channel.KIND_PROPERTY, "100"),
        (side_channel.SOURCE_PROPERTY, "A"),
    ):
        metadata.properties.add(key=key, value=value)
    assert side_channel.side_properties(metadata) == ("persistent://t/ns/x", 100, "A")
    assert side_channel.is_side_topic("persistent://t/ns/georep-subscription-sync")
    assert not side_channel.is_side_topic("persistent://t/ns/orders")
    # One name per gateway process: two processes never share a reader or a writer.
    names = {side_channel.side_producer_name("A", instance) for instance in ("1a2b", "3c4d")}
    assert len(names) == 2 and all(n.startswith("georep.sync.A.") for n in names)
    metadata.properties[1].value = "1²"  # isdigit() says yes, int() says no: not a side message
    with pytest.raises(side_channel.SideMessageError):
        side_channel.side_properties(metadata)


def test_an_apply_acknowledges_only_what_the_cursor_lacks_within_one_ledger():
    action = Apply(
        "s", "A", ranges=[(Position(3, 0), Position(3, 4)), (Position(3, 8), Position(4, 1))]
    )
    assert pulsar_port.entries_to_acknowledge(action, None) == [Position(3, e) for e in range(5)]
    cursor = {"markDeletePosition": "3:1", "individuallyDeletedMessages": "[(3:2..3:3]]"}
    assert pulsar_port.entries_to_acknowledge(action, cursor) == [Position(3, 2), Position(3, 4)]
