"""Real Pulsar, as the anchor: a standalone serves the official client, two standalones
geo-replicate, and replicated subscriptions carry the mark-delete position only."""

from __future__ import annotations

import time

import pulsar
import pytest

from georep.replicator.origin import PULSAR_SOURCE_POSITION_PROPERTY
from pulsar_tools.admin import PulsarAdmin, PulsarAdminError, topic_path
from pulsar_tools.standalone import PulsarStandalone
from tests.harness.failover_checks import stamps_source_position
from tests.harness.waiting import wait_for


def client(standalone: PulsarStandalone) -> pulsar.Client:
    return pulsar.Client(
        standalone.service_url,
        operation_timeout_seconds=30,
        logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, "/dev/null"),
    )


def test_standalone_serves_the_official_client_and_reports_cursor_state(pulsar_pair, geo_topic):
    a = pulsar_pair["A"]
    with_client = client(a)
    try:
        producer = with_client.create_producer(geo_topic, batching_enabled=False)
        consumer = with_client.subscribe(
            geo_topic, "audit", consumer_type=pulsar.ConsumerType.Shared
        )
        for index in range(6):
            producer.send(f"m{index}".encode())
        received = [consumer.receive(10_000) for _ in range(6)]
        assert [m.data() for m in received] == [f"m{i}".encode() for i in range(6)]
        for index in (0, 1, 3):
            consumer.acknowledge(received[index])
        ledger, entry = received[3].message_id().ledger_id(), received[3].message_id().entry_id()

        def acknowledged_ranges() -> dict | None:
            cursor = PulsarAdmin(a.admin_url).internal_stats(geo_topic)["cursors"]["audit"]
            return cursor if cursor["individuallyDeletedMessages"] != "[]" else None

        cursor = wait_for(acknowledged_ranges, timeout_s=60, interval_s=0.2)
        first = received[1].message_id()
        assert cursor["markDeletePosition"] == f"{first.ledger_id()}:{first.entry_id()}"
        # Lower bound open, upper bound closed: (L:E-1..L:E] is the one entry L:E.
        assert (
            cursor["individuallyDeletedMessages"] == f"[({ledger}:{entry - 1}..{ledger}:{entry}]]"
        )
    finally:
        with_client.close()


def test_geo_replication_copies_carry_their_source_position(pulsar_pair, pulsar_version, geo_topic):
    a, b = pulsar_pair["A"], pulsar_pair["B"]
    on_a, on_b = client(a), client(b)
    try:
        copies = on_b.subscribe(geo_topic, "copies", consumer_type=pulsar.ConsumerType.Shared)
        producer = on_a.create_producer(geo_topic, batching_enabled=False)
        sent = [
            producer.send(f"m{index}".encode(), properties={"k": str(index)}) for index in range(5)
        ]
        received = [copies.receive(60_000) for _ in sent]
        assert [m.data() for m in received] == [f"m{i}".encode() for i in range(5)]
        for message, origin in zip(received, sent, strict=True):
            properties = message.properties()
            assert properties["k"] == message.data().decode()[1:]
            # Pulsar 4.0 stamps each copy with its position on the source cluster; 3.0
            # stamps nothing, which the sync-only deployment needs (docs/PULSAR.md).
            if stamps_source_position(pulsar_version):
                assert properties[PULSAR_SOURCE_POSITION_PROPERTY] == (
                    f"{origin.ledger_id()}:{origin.entry_id()}"
                )
            else:
                assert PULSAR_SOURCE_POSITION_PROPERTY not in properties
    finally:
        on_a.close()
        on_b.close()


def test_replicated_subscription_syncs_the_mark_delete_position_only(pulsar_pair, geo_topic):
    a, b = pulsar_pair["A"], pulsar_pair["B"]
    on_a, on_b = client(a), client(b)
    admin_b = PulsarAdmin(b.admin_url)
    try:
        # The subscription exists on B before data flows, as a standby's would.
        on_b.subscribe(
            geo_topic,
            "app",
            consumer_type=pulsar.ConsumerType.Shared,
            replicate_subscription_state_enabled=True,
        ).close()
        initial = admin_b.internal_stats(geo_topic)["cursors"]["app"]["markDeletePosition"]
        consumer = on_a.subscribe(
            geo_topic,
            "app",
            consumer_type=pulsar.ConsumerType.Shared,
            replicate_subscription_state_enabled=True,
        )
        producer = on_a.create_producer(geo_topic, batching_enabled=False)
        # Paced, so that A's snapshots (one a second while data arrives) fall between
        # messages: an MDP only syncs once it passes a completed snapshot.
        for index in range(20):
            producer.send(f"m{index}".encode())
            time.sleep(0.25)
        received = [consumer.receive(10_000) for _ in range(20)]
        for message in received[:10]:
            consumer.acknowledge(message)
        consumer.acknowledge(received[15])  # above the MDP: Pulsar does not sync it

        def b_cursor_moved() -> dict | None:
            cursor = admin_b.internal_stats(geo_topic)["cursors"]["app"]
            return cursor if cursor["markDeletePosition"] != initial else None

        cursor = wait_for(b_cursor_moved, timeout_s=90, interval_s=0.2)  # B's MDP moves
        assert cursor["individuallyDeletedMessages"] == "[]"
    finally:
        on_a.close()
        on_b.close()


def test_admin_errors_carry_status_and_bad_topic_names_are_refused(pulsar_pair):
    admin = PulsarAdmin(pulsar_pair["A"].admin_url)
    with pytest.raises(PulsarAdminError) as error:
        admin.internal_stats("persistent://georep/geo/never-created-topic")
    assert error.value.status == 404
    for bad in ("georep/geo/x", "persistent://georep/x", "kafka://a/b/c"):
        with pytest.raises(ValueError):
            topic_path(bad)
