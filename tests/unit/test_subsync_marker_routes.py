"""Where a topic partition's markers travel is its port's business (subsync/ports.py): in
band through a producer of the gateway's own on the topic, beside real Pulsar through the
namespace's one side channel. A topic's sync only hands markers to its route."""

from __future__ import annotations

import asyncio
from typing import cast

from georep.client.admin import ClusterAdminClient
from georep.client.link import PulsarLink
from georep.domain.topic_name import TopicName
from georep.runtime.awaiting import within
from georep.snapshots import markers_pb2 as pb
from georep.snapshots.markers import MarkerKind, decode
from georep.subsync import side_channel
from georep.subsync.core import SyncCore, WriteMarker
from georep.subsync.ports import GeorepPort, SideMarker, SyncPort
from georep.subsync.pulsar_port import PulsarPort
from georep.subsync.settings import NamespaceSync, SyncSettings
from georep.subsync.topic_sync import TopicSync

TOPIC = TopicName.parse("persistent://t/ns/orders-partition-0")
OTHER = TopicName.parse("persistent://t/ns/orders-partition-1")
#: The ports under test never reach the admin REST.
NO_ADMIN = cast(ClusterAdminClient, object())


def request_marker(name: str = "s1") -> WriteMarker:
    message = pb.SnapshotRequest(snapshot_id=name, source_cluster="A")
    return WriteMarker(MarkerKind.SNAPSHOT_REQUEST, message, replicate_to=("B",))


class FakeProducer:
    def __init__(self, name: str, last_sequence_id: int) -> None:
        self.name = name
        self.last_sequence_id = last_sequence_id
        self.failed = False
        self.closed = False
        self.sent: list = []

    async def send(self, metadata, payload: bytes) -> None:
        self.sent.append((metadata, payload))

    async def close(self) -> None:
        self.closed = True


class FakeLink:
    """Producers it opened; a subscribe that waits until cancelled (a side reader)."""

    def __init__(self) -> None:
        self.producers: list[FakeProducer] = []
        self.subscribed: list[str] = []

    async def create_producer(self, topic: str, name: str) -> FakeProducer:
        producer = FakeProducer(name, last_sequence_id=41 if not self.producers else 99)
        self.producers.append(producer)
        return producer

    async def subscribe(self, topic: str, subscription: str, **options):
        self.subscribed.append(topic)
        await asyncio.Event().wait()


async def test_in_band_markers_go_into_the_topic_through_one_producer_opened_on_the_first():
    link = FakeLink()
    port = GeorepPort(
        NO_ADMIN, cast(PulsarLink, link), local_cluster="A", opening=asyncio.Semaphore(1)
    )
    route = port.markers(TOPIC)
    assert port.in_band and link.producers == []  # an idle topic has no producer
    assert route.listeners(lambda marker: asyncio.sleep(0)) == []  # its reader sees all
    await route.write(request_marker("one"))
    await route.write(request_marker("two"))
    (producer,) = link.producers
    assert producer.name == "georep.sync.A"
    sent = [metadata for metadata, _ in producer.sent]
    assert [m.sequence_id for m in sent] == [42, 43]  # after what the broker holds
    assert all(m.marker_type == MarkerKind.SNAPSHOT_REQUEST for m in sent)
    assert list(sent[0].replicate_to) == ["B"]
    _, message = decode(MarkerKind.SNAPSHOT_REQUEST, producer.sent[1][1])
    assert isinstance(message, pb.SnapshotRequest) and message.snapshot_id == "two"
    # The sync's reader detached: the producer is closed, the next marker opens another.
    await route.close_writer()
    assert producer.closed
    await route.write(request_marker("three"))
    assert len(link.producers) == 2
    assert link.producers[1].sent[0][0].sequence_id == 100
    assert port.marker_channels() == [] and port.problems() == []


async def test_beside_pulsar_a_namespace_has_one_side_channel_for_every_partition():
    link = FakeLink()
    port = PulsarPort(NO_ADMIN, cast(PulsarLink, link), local_cluster="A", instance="i1")
    assert not port.in_band
    first, second = port.markers(TOPIC), port.markers(OTHER)
    assert list(port.side_channels) == ["t/ns"]
    first.start()
    second.start()
    await first.write(request_marker())
    await second.write(request_marker())
    (producer,) = link.producers  # the namespace's one writer
    assert producer.name == "georep.sync.A.i1"
    topics = [side_channel.side_properties(metadata)[0] for metadata, _ in producer.sent]
    assert topics == [str(TOPIC), str(OTHER)]
    await first.close_writer()  # shared: it stays open
    assert not producer.closed
    assert [c["partitions"] for c in port.marker_channels()] == [2]
    first.stop()
    await port.close_idle()
    assert list(port.side_channels) == ["t/ns"]  # the other partition still syncs
    second.stop()
    await port.close_idle()
    assert port.side_channels == {} and producer.closed
    await port.stop()


async def test_a_side_route_hands_markers_over_in_order_and_drops_the_oldest_past_its_bound():
    port = PulsarPort(NO_ADMIN, cast(PulsarLink, FakeLink()), local_cluster="A", instance="i1")
    route = port.markers(TOPIC)
    for n in range(side_channel.SIDE_INBOX_MAX + 2):
        route.deliver(SideMarker(100, b"", "B", n))
    assert route.dropped == 2
    heard: list[int] = []
    done = asyncio.Event()

    async def hear(marker: SideMarker) -> None:
        heard.append(marker.written_ms)
        if len(heard) == side_channel.SIDE_INBOX_MAX:
            done.set()

    (listening,) = route.listeners(hear)
    task = asyncio.ensure_future(listening)
    await within(done.wait(), 5)
    assert heard == list(range(2, side_channel.SIDE_INBOX_MAX + 2))
    task.cancel()
    await port.stop()


class FakeRoute:
    def __init__(self) -> None:
        self.written: list[WriteMarker] = []
        self.dropped = 3

    async def write(self, marker: WriteMarker) -> None:
        self.written.append(marker)


class FakePort:
    in_band = True

    def __init__(self) -> None:
        self.route = FakeRoute()

    def markers(self, topic: TopicName) -> FakeRoute:
        assert topic == TOPIC
        return self.route


def sync_core(in_band: bool) -> SyncCore:
    return SyncCore("A", namespace_sync=NamespaceSync(), settings=SyncSettings(), in_band=in_band)


async def test_a_topic_sync_writes_every_marker_through_its_ports_route():
    port = FakePort()
    sync = TopicSync(
        topic=str(TOPIC),
        core=sync_core(in_band=True),
        local_link=cast(PulsarLink, FakeLink()),
        port=cast(SyncPort, port),
        connected=lambda remote: False,
    )
    marker = request_marker()
    await sync._perform([marker])
    assert port.route.written == [marker]
    stats = sync.stats()
    assert stats["markersWritten"] == {"SNAPSHOT_REQUEST": 1}
    assert stats["sideMarkersDropped"] == 3


def test_states_are_written_again_only_beside_the_topic():
    assert sync_core(in_band=True).restate_interval_s is None
    assert sync_core(in_band=False).restate_interval_s is not None
