"""The gateway's PulsarPort on a real Pulsar 4.0.7 standalone: it reads subscription state
over admin v2, applies a plan by acknowledging exactly its entries (creating a missing
subscription), and refuses, without retrying, a subscription its application holds
Exclusive."""

from __future__ import annotations

import asyncio

import pulsar
import pytest

from georep.client.admin import ClusterAdminClient
from georep.client.link import PulsarLink
from georep.position import Position
from georep.subsync.core import Apply
from georep.subsync.pulsar_port import ApplyRefused, PulsarPort
from georep.topic_name import TopicName


def quiet_client(url: str) -> pulsar.Client:
    return pulsar.Client(
        url,
        operation_timeout_seconds=30,
        logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, "/dev/null"),
    )


async def with_port(standalone, work):
    admin = ClusterAdminClient(standalone.admin_url, cluster_name=standalone.name)
    link = PulsarLink(standalone.service_url)
    try:
        return await work(PulsarPort(admin, link, local_cluster=standalone.name, instance="test"))
    finally:
        await link.close()
        await admin.close()


def test_apply_acknowledges_exactly_the_plan_and_states_show_it(pulsar_pair, geo_topic):
    a = pulsar_pair["A"]
    client = quiet_client(a.service_url)
    try:
        producer = client.create_producer(geo_topic, batching_enabled=False)
        ids = [producer.send(f"m{i}".encode()) for i in range(10)]
        ledger = ids[0].ledger_id()
        first = ids[0].entry_id()
        plan = Apply(
            "s",
            "B",
            ranges=[
                (Position(ledger, first), Position(ledger, first + 2)),
                (Position(ledger, first + 5), Position(ledger, first + 6)),
            ],
        )
        topic = TopicName.parse(geo_topic)

        async def work(port: PulsarPort):
            applied = await port.apply(topic, plan)  # "s" does not exist yet
            again = await port.apply(topic, plan)  # nothing left to acknowledge
            return applied, again, await port.states(topic)

        applied, again, states = asyncio.run(with_port(a, work))
        assert (applied.ranges, again.ranges) == (5, 0)
        state = states["s"]
        assert state.mark_delete == (ledger, first + 2)
        assert state.ranges == ((Position(ledger, first + 5), Position(ledger, first + 6)),)
        assert state.consumers == 0  # the acknowledger came and went

        consumer = client.subscribe(geo_topic, "s", consumer_type=pulsar.ConsumerType.Shared)
        rest = []
        while True:
            try:
                rest.append(consumer.receive(3_000).data())
            except pulsar.Timeout:
                break
        assert rest == [b"m3", b"m4", b"m7", b"m8", b"m9"]
    finally:
        client.close()


def test_a_subscription_held_exclusive_by_its_application_is_refused(pulsar_pair, geo_topic):
    a = pulsar_pair["A"]
    client = quiet_client(a.service_url)
    try:
        client.subscribe(geo_topic, "held", consumer_type=pulsar.ConsumerType.Exclusive)
        producer = client.create_producer(geo_topic, batching_enabled=False)
        message_id = producer.send(b"m0")  # above the cursor: the plan has work to do
        where = Position(message_id.ledger_id(), message_id.entry_id())
        plan = Apply("held", "B", ranges=[(where, where)])

        async def work(port: PulsarPort):
            await port.apply(TopicName.parse(geo_topic), plan)

        with pytest.raises(ApplyRefused) as refused:
            asyncio.run(with_port(a, work))
        assert not refused.value.retriable
    finally:
        client.close()
