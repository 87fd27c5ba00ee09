"""On real Pulsar 4.0.7: a consumer that grants no permits receives nothing, yet
acknowledges exact message ids on a Shared subscription, while the application's own
consumer keeps receiving everything else. This is how a subscription sync can apply
another cluster's acknowledgements to a real Pulsar cluster without disturbing its
consumers (there is no admin call for it in 4.0)."""

from __future__ import annotations

import asyncio

import pulsar

from georep.client.consumer import InitialPosition, SubType
from georep.client.link import PulsarLink
from georep.domain.position import Position
from pulsar_tools.admin import PulsarAdmin
from tests.harness.waiting import wait_for


def position(message: pulsar.Message) -> tuple[int, int]:
    message_id = message.message_id()
    return message_id.ledger_id(), message_id.entry_id()


async def acknowledge(service_url: str, topic: str, positions: list[Position]) -> int:
    link = PulsarLink(service_url)
    try:
        acknowledger = await link.subscribe(
            topic, "app", sub_type=SubType.SHARED, initial_position=InitialPosition.EARLIEST,
            receiver_queue=0, consumer_name="georep-acknowledger",
        )  # fmt: skip
        acknowledger.ack_individual(positions)
        await asyncio.sleep(1.0)  # what it would be dispatched, if anything, arrives by now
        received = acknowledger.queued
        await acknowledger.close()
        return received
    finally:
        await link.close()


def test_a_consumer_without_permits_acknowledges_exact_ids_and_takes_nothing(
    pulsar_pair, geo_topic
):
    a = pulsar_pair["A"]
    client = pulsar.Client(
        a.service_url, logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, "/dev/null")
    )
    try:
        # The application's consumer prefetches one message at a time.
        app = client.subscribe(
            geo_topic, "app", consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=1
        )
        producer = client.create_producer(geo_topic, batching_enabled=False)
        ids = [producer.send(f"m{i}".encode()) for i in range(10)]
        held = app.receive(10_000)  # delivered to the application, not acknowledged
        assert held.data() == b"m0"
        targets = [Position(ids[i].ledger_id(), ids[i].entry_id()) for i in (0, 5, 7)]

        received = asyncio.run(acknowledge(a.service_url, geo_topic, targets))
        assert received == 0

        admin = PulsarAdmin(a.admin_url)

        def acknowledged() -> dict | None:
            cursor = admin.internal_stats(geo_topic)["cursors"]["app"]
            return cursor if cursor["markDeletePosition"] == str(targets[0]) else None

        cursor = wait_for(acknowledged, timeout_s=30, interval_s=0.2)
        ledger = targets[0][0]
        assert cursor["individuallyDeletedMessages"] == (
            f"[({ledger}:{targets[1][1] - 1}..{ledger}:{targets[1][1]}],"
            f"({ledger}:{targets[2][1] - 1}..{ledger}:{targets[2][1]}]]"
        )
        # The application receives the rest, and not what was acknowledged for it.
        rest = []
        while True:
            try:
                rest.append(app.receive(3_000).data())
            except pulsar.Timeout:
                break
        assert rest == [b"m1", b"m2", b"m3", b"m4", b"m6", b"m8", b"m9"]
    finally:
        client.close()
