"""The link producer's pipelining rules, fed frames by hand: receipts in order only,
backpressure past its pending limits, and failure of everything pending at once."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest

from georep.client.connection import LinkConnection
from georep.client.errors import MessageTooLarge, ServerError
from georep.client.producer import LinkProducer
from georep.runtime.awaiting import within
from georep.wire import commands, frames
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import Type


class FakeConnection:
    url = "pulsar://fake:6650"
    is_ready = True
    frame_bytes_max = 64 * 1024

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed_with: str | None = None

    def write(self, data: bytes) -> None:
        self.written.append(data)

    async def drain(self) -> None:
        pass

    def close(self, reason: str) -> None:
        self.closed_with = reason

    def unregister_producer(self, producer_id: int) -> None:
        pass


def link(connection: FakeConnection) -> LinkConnection:
    # The fake stands in for a LinkConnection: it has what a LinkProducer writes to and asks.
    return cast(LinkConnection, connection)


def meta(sequence_id: int) -> pb.MessageMetadata:
    return pb.MessageMetadata(producer_name="p", sequence_id=sequence_id, publish_time=1)


def receipt(sequence_id: int, entry_id: int = 0) -> frames.Frame:
    message_id = pb.MessageIdData(ledger_id=5, entry_id=entry_id)
    return frames.Frame(commands.send_receipt(1, sequence_id, message_id))


@pytest.fixture
def producer() -> LinkProducer:
    return LinkProducer(link(FakeConnection()), 1, "persistent://t/ns/x", pending_count_max=2)


async def test_receipts_resolve_in_order(producer) -> None:
    first = await producer.send(meta(10), b"a")
    second = await producer.send(meta(11), b"b")
    producer.on_frame(receipt(10, 0))
    producer.on_frame(receipt(11, 1))
    assert (await first).position == (5, 0)
    assert (await second).position == (5, 1)
    assert producer.pending_count == 0


async def test_a_receipt_out_of_order_closes_the_connection(producer) -> None:
    await producer.send(meta(10), b"a")
    await producer.send(meta(11), b"b")
    producer.on_frame(receipt(11))
    assert "while 10 is the oldest" in producer.connection.closed_with


async def test_send_waits_for_room(producer) -> None:
    await producer.send(meta(1), b"a")
    await producer.send(meta(2), b"b")
    third = asyncio.ensure_future(producer.send(meta(3), b"c"))
    await asyncio.sleep(0)
    assert not third.done()
    producer.on_frame(receipt(1))
    await within(third, 1)
    assert len(producer.connection.written) == 3


async def test_a_send_error_fails_everything_pending(producer) -> None:
    first = await producer.send(meta(1), b"a")
    second = await producer.send(meta(2), b"b")
    error = commands.send_error(1, 1, pb.PERSISTENCE_ERROR, "disk gone")
    producer.on_frame(frames.Frame(error))
    for future in (first, second):
        with pytest.raises(ServerError):
            await future
    with pytest.raises(ServerError):
        await producer.send(meta(3), b"c")


async def test_an_entry_larger_than_the_remote_takes(producer) -> None:
    with pytest.raises(MessageTooLarge):
        await producer.send(meta(1), b"x" * (128 * 1024))


def test_a_batch_declares_its_highest_sequence_id() -> None:
    connection = FakeConnection()
    producer = LinkProducer(link(connection), 1, "persistent://t/ns/x")
    metadata = meta(7)
    metadata.highest_sequence_id = 7
    metadata.num_messages_in_batch = 3

    async def go() -> None:
        await producer.send(metadata, b"abc", num_messages=3)

    asyncio.run(go())
    decoder = frames.FrameDecoder()
    decoder.feed(connection.written[0])
    (frame,) = decoder.frames()
    assert frame.type == Type.SEND
    assert frame.command.send.HasField("highest_sequence_id")
    assert frame.command.send.highest_sequence_id == 7
    assert frame.command.send.num_messages == 3
