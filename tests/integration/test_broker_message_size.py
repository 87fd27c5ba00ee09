"""Message sizes with the official pulsar-client: what the broker announces is what its
storage takes. A message just under the maximum is stored; one the storage can never
take (too large with its metadata, or chunked) fails in the application at once, while
the same producer and the topic's other producers go on. (The client counts metadata
with the payload against the announced maximum, so the metadata case is the client's
own refusal; the chunked case is the broker's.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pulsar
import pytest

from georep import limits
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import Type
from tests.harness.broker_cluster import (
    InProcessCluster,
    RawConnection,
    connect_frame,
    open_client,
    producer_frame,
    receive_all,
    send_frame,
    unique_topic,
)

pytestmark = pytest.mark.timeout(180)

EARLIEST = pulsar.InitialPosition.Earliest
#: Longer than any refusal may take; the refusals must come well before it.
SEND_TIMEOUT_MS = 30_000
MAX = limits.pulsar_message_bytes_max


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[InProcessCluster]:
    running = InProcessCluster(tmp_path_factory.mktemp("sizes") / "cluster").start()
    yield running
    running.stop()
    assert running.errors == []


class Neighbour:
    """Another producer on the topic, sending small messages until stopped."""

    def __init__(self, client: pulsar.Client, topic: str) -> None:
        self.producer = client.create_producer(topic, batching_enabled=False)
        self.sent = 0
        self.errors: list[Exception] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.producer.send(b"neighbour-%d" % self.sent)
                self.sent += 1
            except Exception as error:  # counted, and asserted on
                self.errors.append(error)
            time.sleep(0.005)

    def __enter__(self) -> Neighbour:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.close()


def _refused(send) -> tuple[Exception, float]:
    started = time.monotonic()
    with pytest.raises(pulsar.PulsarException) as caught:
        send()
    return caught.value, time.monotonic() - started


def test_a_message_at_the_announced_maximum_is_stored(cluster: InProcessCluster) -> None:
    topic = unique_topic("max")
    with open_client(cluster.url) as client:
        consumer = client.subscribe(topic, "s", initial_position=EARLIEST)
        producer = client.create_producer(
            topic, batching_enabled=False, send_timeout_millis=SEND_TIMEOUT_MS
        )
        # The client counts payload and metadata against what the broker announced.
        producer.send(b"z" * (MAX - 100))
        producer.send(b"z" * (MAX - 2000), properties={"app": "p" * 1000})
        # The probe that once wedged a topic: now refused by the client at once.
        error, seconds = _refused(lambda: producer.send(b"z" * 5_242_855))
        assert isinstance(error, pulsar.MessageTooBig)
        print(f"5242855 bytes: refused in {seconds:.3f} s")
        producer.send(b"after")
        received = receive_all(consumer, 3)
        assert [len(m.data()) for m in received] == [MAX - 100, MAX - 2000, 5]


@pytest.mark.parametrize("kind", ["metadata", "chunked"])
def test_a_message_never_stored_fails_its_send_and_nothing_else(
    cluster: InProcessCluster, kind: str
) -> None:
    topic = unique_topic(f"never-{kind}")
    with open_client(cluster.url) as client:
        consumer = client.subscribe(topic, "s", initial_position=EARLIEST)
        options = {"batching_enabled": False, "send_timeout_millis": SEND_TIMEOUT_MS}
        if kind == "chunked":
            options["chunking_enabled"] = True
        producer = client.create_producer(topic, **options)
        producer.send(b"before")
        with Neighbour(client, topic) as neighbour:
            if kind == "chunked":
                error, seconds = _refused(lambda: producer.send(b"c" * (2 * MAX)))
            else:
                # Within the payload maximum, but 6 KiB of properties: never storable.
                error, seconds = _refused(
                    lambda: producer.send(b"m" * MAX, properties={"big": "b" * 6144})
                )
            print(f"{kind}: refused in {seconds:.3f} s with {type(error).__name__}")
            sent_before = neighbour.sent
            producer.send(b"after")  # the same producer goes on
            time.sleep(0.5)
        assert neighbour.errors == []
        assert neighbour.sent > sent_before
        payloads = [m.data() for m in receive_all(consumer, 2 + neighbour.sent)]
        mine = [p for p in payloads if not p.startswith(b"neighbour-")]
        assert mine == [b"before", b"after"]
        producer.close()


def test_a_client_that_ignores_the_maximum_is_refused_without_a_retry_loop(
    cluster: InProcessCluster,
) -> None:
    """A raw producer sends an entry over payload + metadata maximum: the broker stores
    nothing, closes the producer, refuses its re-creation once, then takes it again; the
    connection stays open and the topic serves the next SEND."""
    topic = unique_topic("raw")
    raw = RawConnection(cluster.url)
    try:
        raw.send(connect_frame() + producer_frame(topic, name="raw"))
        opened, _ = raw.replies()
        assert [c.type for c in opened] == [Type.CONNECTED, Type.PRODUCER_SUCCESS]
        too_large = MAX + limits.pulsar_message_metadata_bytes_max + 1
        raw.send(send_frame(1, 0, b"x" * too_large) + send_frame(1, 1, b"pipelined"))
        answers, closed = raw.replies(1.0)
        assert not closed
        assert [c.type for c in answers] == [Type.CLOSE_PRODUCER]
        raw.send(producer_frame(topic, name="raw"))
        answers, _ = raw.replies()
        assert [c.type for c in answers] == [Type.ERROR]
        assert answers[0].error.error == pb.PRODUCER_BLOCKED_QUOTA_EXCEEDED_EXCEPTION
        assert "can never be stored" in answers[0].error.message
        raw.send(producer_frame(topic, name="raw"))
        answers, _ = raw.replies()
        assert [c.type for c in answers] == [Type.PRODUCER_SUCCESS]
        raw.send(send_frame(1, 2, b"stored"))
        answers, closed = raw.replies()
        assert [c.type for c in answers] == [Type.SEND_RECEIPT]
        assert not closed
    finally:
        raw.close()
    with open_client(cluster.url) as client:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        assert reader.read_next(timeout_millis=5000).data() == b"stored"
        assert not reader.has_message_available()
