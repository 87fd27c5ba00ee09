"""Subscription sync against live subscriptions, on an in-process cluster so that broker
state can be looked at between two steps: sync-state counts acknowledgements a live
subscription took and has not yet handed to its cursor, and a sync steps a live
subscription over markers without disconnecting its consumer."""

from __future__ import annotations

from collections.abc import Iterator

import pulsar
import pytest

from georep.broker import subscription_sync
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.wire.commands import Type
from tests.harness.broker_cluster import (
    InProcessCluster,
    RawConnection,
    admin_call,
    connect_frame,
    open_client,
    producer_frame,
    receive_all,
    receive_none,
    send_frame,
    unique_topic,
)
from tests.harness.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

EARLIEST = pulsar.InitialPosition.Earliest


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[InProcessCluster]:
    running = InProcessCluster(tmp_path_factory.mktemp("sync-live") / "cluster", admin_port=0)
    running.start()
    yield running
    running.stop()
    assert running.errors == []


def state_of(cluster: InProcessCluster, topic: str) -> dict:
    path = "/admin/georep/v1/persistent/" + topic.removeprefix("persistent://") + "/sync-state"
    status, state = admin_call(cluster.admin_url, "GET", path)
    assert status == 200, state
    return state


def doc(position) -> dict[str, int]:
    return {"ledgerId": position[0], "entryId": position[1]}


def test_sync_state_counts_acknowledgements_not_yet_persisted(cluster) -> None:
    topic = unique_topic("pending")
    with open_client(cluster.url) as client:
        consumer = client.subscribe(
            topic, "s", consumer_type=pulsar.ConsumerType.Shared, initial_position=EARLIEST
        )
        producer = client.create_producer(topic, batching_enabled=False)
        ids = [producer.send(f"m{n}".encode()) for n in range(8)]
        p = [Position(i.ledger_id(), i.entry_id()) for i in ids]
        receive_all(consumer, 8, ack=False)

        def hand_in_and_look(c):
            """One step of the loop: acknowledgements taken, nothing written yet."""
            loaded = c.service.loaded_topic(TopicName.parse(topic))
            live = loaded.subscriptions["s"]
            live.acknowledge_synced(p[1], [(p[3], p[4])], {})
            live.acknowledge_entries([p[5]])  # taken as a client's acknowledgement is
            persisted = live.cursor.stats()["persisted_mark_delete_position"]
            return persisted, subscription_sync._view(loaded, "s")

        persisted, view = cluster.call(hand_in_and_look)
        assert persisted == f"{p[0][0]}:{p[0][1] - 1}"  # none of it is persisted yet
        assert view.mark_delete == p[1] and view.ranges == [(p[3], p[5])]
        state = state_of(cluster, topic)["subscriptions"]["s"]
        assert state["markDelete"] == doc(p[1])
        assert state["ranges"] == [{"first": doc(p[3]), "last": doc(p[5])}]
        consumer.close()


def test_a_sync_steps_a_live_subscription_over_markers(cluster) -> None:
    topic = unique_topic("live-markers")
    layout = [b"m0", None, None, b"m3"]  # None: a marker
    with open_client(cluster.url) as client:
        consumer = client.subscribe(topic, "app", initial_position=EARLIEST)
        raw = RawConnection(cluster.url)
        raw.send(connect_frame() + producer_frame(topic, name="georep.sync.S"))
        opened, _ = raw.replies()
        assert [c.type for c in opened] == [Type.CONNECTED, Type.PRODUCER_SUCCESS]
        raw.send(
            b"".join(
                send_frame(1, n, payload or b"", marker_type=None if payload else 10)
                for n, payload in enumerate(layout)
            )
        )
        receipts: list = []

        def four_receipts() -> bool:
            receipts.extend(raw.replies(0.1)[0])
            return len([c for c in receipts if c.type == Type.SEND_RECEIPT]) >= 4

        wait_for(four_receipts)
        raw.close()
        p = [
            (c.send_receipt.message_id.ledger_id, c.send_receipt.message_id.entry_id)
            for c in receipts
            if c.type == Type.SEND_RECEIPT
        ]
        assert [m.data() for m in receive_all(consumer, 2, ack=False)] == [b"m0", b"m3"]
        path = (
            "/admin/georep/v1/persistent/"
            + topic.removeprefix("persistent://")
            + "/subscription/app/sync"
        )
        status, answer = admin_call(
            cluster.admin_url,
            "POST",
            path,
            {"ranges": [{"first": doc(p[0]), "last": doc(p[0])}]},
        )
        assert status == 200, answer
        assert answer == {"markDelete": doc(p[2]), "rangesCount": 0, "created": False}
        consumer.redeliver_unacknowledged_messages()
        assert [m.data() for m in receive_all(consumer, 1)] == [b"m3"]
        assert receive_none(consumer) == []
        consumer.close()


def test_an_admin_acknowledge_is_forgotten_by_the_live_consumer_as_a_sync_is(cluster) -> None:
    """The admin's acknowledge goes through ``Subscription.acknowledge_entries`` like a
    sync's whole entries: the consumer stops counting what it acknowledged as unacked."""
    topic = unique_topic("admin-ack")
    rest = topic.removeprefix("persistent://")
    with open_client(cluster.url) as client:
        consumer = client.subscribe(
            topic, "s", consumer_type=pulsar.ConsumerType.Shared, initial_position=EARLIEST
        )
        producer = client.create_producer(topic, batching_enabled=False)
        ids = [producer.send(f"m{n}".encode()) for n in range(6)]
        p = [Position(i.ledger_id(), i.entry_id()) for i in ids]
        receive_all(consumer, 6, ack=False)
        status, _ = admin_call(
            cluster.admin_url,
            "POST",
            f"/admin/georep/v1/persistent/{rest}/subscription/s/acknowledge",
            {"positions": [doc(p[1]), doc(p[4])]},
        )
        assert status == 204
        status, stats = admin_call(cluster.admin_url, "GET", f"/admin/v2/persistent/{rest}/stats")
        assert status == 200, stats
        (held,) = stats["subscriptions"]["s"]["consumers"]
        assert held["unackedMessages"] == 4
        assert stats["subscriptions"]["s"]["msgBacklog"] == 4
        consumer.redeliver_unacknowledged_messages()
        again = sorted(m.data() for m in receive_all(consumer, 4))
        assert again == [b"m0", b"m2", b"m3", b"m5"]
        assert receive_none(consumer) == []
        consumer.close()
