"""The replicator's buffer, acknowledgements and remote failover, with fake links: one
interleaving at a time, deterministically (no broker, no timing)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

import pytest

from georep.client.consumer import ReceivedEntry
from georep.client.errors import LinkClosed, LinkError
from georep.client.link import PulsarLink
from georep.client.producer import SendReceipt
from georep.domain.position import Position
from georep.replicator.origin import sequence_id_of
from georep.replicator.replicator import Replicator
from georep.replicator.settings import ReplicatorSettings
from georep.runtime.awaiting import within
from georep.wire import pulsar_wire_pb2 as pb

TOPIC = "persistent://t/ns/x"


def entry(entry_id: int, *, ledger_id: int = 3, replicated_from: str = "") -> ReceivedEntry:
    metadata = pb.MessageMetadata(producer_name="app", sequence_id=entry_id, publish_time=1)
    if replicated_from:
        metadata.replicated_from = replicated_from
    return ReceivedEntry(Position(ledger_id, entry_id), metadata, b"payload")


class FakeConsumer:
    failure: LinkError | None = None

    def __init__(self) -> None:
        self.queue: asyncio.Queue[ReceivedEntry] = asyncio.Queue()
        self.acks: list[tuple[int, int]] = []

    async def receive(self) -> ReceivedEntry:
        return await self.queue.get()

    def ack_cumulative(self, position) -> None:
        self.acks.append(position)

    async def backlog(self) -> int:
        return self.queue.qsize()

    async def close(self) -> None:
        pass


class FakeProducer:
    def __init__(self, last_sequence_id: int = -1) -> None:
        self.last_sequence_id = last_sequence_id
        self.sent: list[int] = []
        self.futures: list[asyncio.Future] = []
        self.failure: LinkError | None = None
        self._callbacks: list[Callable[[LinkError], None]] = []

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def on_failure(self, callback) -> None:
        self._callbacks.append(callback)

    async def send(self, metadata, payload, *, num_messages=1):
        if self.failure:
            raise self.failure
        future = asyncio.get_running_loop().create_future()
        self.sent.append(metadata.sequence_id)
        self.futures.append(future)
        return future

    def receipt(self, index: int, duplicate: bool = False) -> None:
        position = Position(-1, -1) if duplicate else Position(9, index)
        self.futures[index].set_result(SendReceipt(self.sent[index], position))

    def fail(self) -> None:
        self.failure = LinkClosed("remote gone")
        for future in self.futures:
            if not future.done():
                future.set_exception(self.failure)
        for callback in self._callbacks:
            callback(self.failure)

    async def close(self) -> None:
        pass


class FakeLink:
    def __init__(self, consumers=(), producers=()) -> None:
        self.consumers = list(consumers)
        self.producers = list(producers)

    async def subscribe(self, *args, **kwargs):
        """The same consumer again after a local restart (the fake redelivers nothing)."""
        return self.consumers[0]

    async def create_producer(self, *args, **kwargs):
        if not self.producers:
            raise LinkClosed("no remote")
        return self.producers.pop(0)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


@pytest.fixture
async def setup():
    consumer = FakeConsumer()
    producers = [FakeProducer(), FakeProducer()]
    replicator = Replicator(
        topic=TOPIC,
        local_cluster="A",
        remote_cluster="B",
        local_link=cast(PulsarLink, FakeLink(consumers=[consumer])),
        remote_link=cast(PulsarLink, FakeLink(producers=producers)),
        settings=ReplicatorSettings(backoff_s_initial=0.001, backoff_s_max=0.01),
    )
    replicator.start()
    yield replicator, consumer, producers
    await replicator.stop()


async def test_acks_follow_receipts_in_order(setup) -> None:
    replicator, consumer, (producer, _) = setup
    for i in range(4):
        consumer.queue.put_nowait(entry(i))
    await settle()
    assert producer.sent == [sequence_id_of(3, i) for i in range(4)]
    assert consumer.acks == []
    producer.receipt(1)  # out of order cannot happen on the wire, but must not ack early
    await settle()
    assert consumer.acks == []
    producer.receipt(0)
    await settle()
    assert consumer.acks == [(3, 1)]  # one cumulative ack for both
    producer.receipt(2, duplicate=True)
    producer.receipt(3)
    await settle()
    assert consumer.acks[-1] == (3, 3)
    stats = replicator.stats()
    assert stats["msgOutCounter"] == 3 and stats["duplicatesCounter"] == 1


async def test_entries_from_elsewhere_are_acked_not_sent(setup) -> None:
    replicator, consumer, (producer, _) = setup
    consumer.queue.put_nowait(entry(0))
    consumer.queue.put_nowait(entry(1, replicated_from="B"))
    consumer.queue.put_nowait(entry(2, replicated_from="C"))
    await settle()
    assert producer.sent == [sequence_id_of(3, 0)]
    assert consumer.acks == []  # the skipped ones wait behind the unanswered send
    producer.receipt(0)
    await settle()
    assert consumer.acks == [(3, 2)]
    assert replicator.stats()["skippedCounter"] == {"not-local": 2}


async def test_remote_failure_resends_what_was_in_flight(setup) -> None:
    replicator, consumer, (first, second) = setup
    for i in range(5):
        consumer.queue.put_nowait(entry(i))
    await settle()
    first.receipt(0)
    await settle()
    second.last_sequence_id = sequence_id_of(3, 2)  # the remote stored 1 and 2 already
    first.fail()
    await asyncio.sleep(0.05)  # the backoff
    await settle()
    assert second.sent == [sequence_id_of(3, 3), sequence_id_of(3, 4)]
    assert consumer.acks == [(3, 0), (3, 2)]
    second.receipt(0)
    second.receipt(1)
    await settle()
    assert consumer.acks[-1] == (3, 4)
    stats = replicator.stats()
    assert stats["alreadyReplicatedCounter"] == 2 and stats["errorsCounter"] >= 1
    assert "remote gone" in stats["lastError"]


async def test_an_entry_that_does_not_fit_stalls_instead_of_being_skipped(setup) -> None:
    replicator, consumer, (producer, _) = setup
    consumer.queue.put_nowait(entry(0))
    consumer.queue.put_nowait(entry(2**24))  # beyond the sequence id's entry bits
    consumer.queue.put_nowait(entry(1, ledger_id=4))
    await settle()
    producer.receipt(0)
    await settle()
    assert consumer.acks in ([], [(3, 0)])
    assert sequence_id_of(4, 1) not in producer.sent
    assert "ReplicationStalled" in (replicator.stats()["lastError"] or "")


class EndingConsumer(FakeConsumer):
    """Reports a backlog (so the stats sampler waits for activity with a time limit) and
    fails once its queue is empty after :meth:`last_then_gone`, as a consumer does whose
    connection closed right after the broker pushed one more entry."""

    async def receive(self) -> ReceivedEntry:
        if self.queue.empty() and self.failure is not None:
            raise self.failure
        return await self.queue.get()

    async def backlog(self) -> int:
        return 5

    def last_then_gone(self, last: ReceivedEntry) -> None:
        self.queue.put_nowait(last)
        self.failure = LinkClosed("topic moved")


async def test_a_consumer_lost_as_it_delivers_its_last_entry_is_subscribed_again() -> None:
    """The entry wakes the stats sampler in the same event-loop turn as the replicator
    cancels it; Python 3.11's asyncio.wait_for dropped that cancellation, the sampler ran
    on and the replicator waited for it for ever: the topic stopped replicating, silently.
    """
    first, second = EndingConsumer(), FakeConsumer()
    local = FakeLink(consumers=[first])
    subscribed: list[EndingConsumer | FakeConsumer] = []

    async def subscribe(*args, **kwargs):
        consumer = first if not subscribed else second
        subscribed.append(consumer)
        return consumer

    local.subscribe = subscribe  # type: ignore[method-assign]
    replicator = Replicator(
        topic=TOPIC,
        local_cluster="A",
        remote_cluster="B",
        local_link=cast(Any, local),
        remote_link=cast(Any, FakeLink(producers=[FakeProducer(), FakeProducer()])),
        settings=ReplicatorSettings(
            backoff_s_initial=0.001, backoff_s_max=0.01, stats_interval_s=0.001
        ),
    )
    replicator.start()
    try:
        for _ in range(200):  # the sampler asked the backlog, slept, and waits for activity
            await asyncio.sleep(0.005)
            if replicator.backlog_entries == 5:
                break
        await asyncio.sleep(0.02)
        first.last_then_gone(entry(1))
        for _ in range(1000):
            if len(subscribed) == 2:
                break
            await asyncio.sleep(0.005)
        assert subscribed == [first, second], replicator.stats()
        assert replicator.counters.errors == 1 and "topic moved" in str(replicator.last_error)
    finally:
        await replicator.stop()


async def test_producers_open_on_the_remote_while_the_local_cluster_is_busy_opening() -> None:
    """Each cluster paces its own opens: thousands of partitions starting queue their
    subscribes on the local cluster, and the remote's producers must not wait behind
    them (before, one semaphore made the remote idle until every local open was done)."""
    local_opens = asyncio.Semaphore(1)
    replicator = Replicator(
        topic=TOPIC,
        local_cluster="A",
        remote_cluster="B",
        local_link=cast(PulsarLink, FakeLink(consumers=[FakeConsumer()])),
        remote_link=cast(PulsarLink, FakeLink(producers=[FakeProducer()])),
        opening=local_opens,
        remote_opening=asyncio.Semaphore(1),
    )
    async with local_opens:  # every local open taken by other partitions
        producer = await within(replicator._open_producer(), 1.0)
    assert producer is not None
