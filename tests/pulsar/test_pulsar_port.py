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
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.runtime.awaiting import within
from georep.subsync.core import Apply
from georep.subsync.pulsar_port import ApplyRefused, PulsarPort


def quiet_client(url: str) -> pulsar.Client:
    # A first subscribe creates the topic: its ledger waits on the bookie's journal,
    # which a disk shared with the rest of the suite has held past 30 s.
    return pulsar.Client(
        url,
        operation_timeout_seconds=90,
        logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, "/dev/null"),
    )


async def with_port(standalone, work):
    admin = ClusterAdminClient(standalone.admin_url, cluster_name=standalone.name)
    link = PulsarLink(standalone.service_url)
    port = PulsarPort(admin, link, local_cluster=standalone.name, instance="test")
    try:
        return await work(port)
    finally:
        await port.stop()
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


def test_an_acknowledgement_on_a_topic_that_moved_lately_is_found_between_pages(
    pulsar_pair, geo_topic
):
    """A topic whose subscription moved on a metrics page is hot: its acknowledgement is
    found by reading that topic's ``stats`` alone, with no page read in between."""
    a = pulsar_pair["A"]
    client = quiet_client(a.service_url)
    topic = TopicName.parse(geo_topic)
    try:
        producer = client.create_producer(geo_topic, batching_enabled=False)
        producer.send(b"before")  # the topic exists before the namespace's first page
        consumer = client.subscribe(
            geo_topic,
            "s",
            consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest,
        )

        async def work(port: PulsarPort):
            scan = port.scan
            scan._interval_s = 0.2
            changed = await port.changes(topic.namespace, None)
            mark = changed.mark
            # the namespace's first page (its baseline), then pages until the message
            # published now shows: the topic is hot
            while str(topic) not in scan.hot_topics():
                mark = (await within(port.changes(topic.namespace, mark), 30)).mark
                if scan.stats["scans"] == 1:
                    producer.send(b"fresh")
            scan._interval_s = 3_600.0  # one more page at most, then none for the test
            pages = scan.stats["scans"]
            while scan.stats["scans"] == pages:  # every page publishes, even unmoved
                mark = (await within(port.changes(topic.namespace, mark), 30)).mark
            pages, found = scan.stats["scans"], scan.stats["hotChanges"]
            for message in (consumer.receive(10_000), consumer.receive(10_000)):
                consumer.acknowledge(message)
            while True:
                answer = await within(port.changes(topic.namespace, mark), 30)
                mark = answer.mark
                if answer.topics and str(topic) in answer.topics:
                    if scan.stats["hotChanges"] > found:
                        break
            return pages, scan.stats["scans"], scan.to_json()

        before, after, stats = asyncio.run(with_port(a, work))
        assert after == before  # no page was read: the topic's own stats told
        assert stats["hotTopics"] >= 1
    finally:
        client.close()
