"""The last sequence id an entry carries: given by the sender, or inferred for a batch.

The gateway's replicator sends a stored batch under one sequence id (its origin
position) with ``highest_sequence_id`` set to the same id; the next entry's id is one
higher and must not be taken for a duplicate, live or after the dedup state is rebuilt
from stored metadata.
"""

from __future__ import annotations

from typing import cast

import pytest

from georep.broker.deduplication import DupStatus, MessageDeduplication, highest_sequence_id
from georep.broker.ports import TopicLog
from georep.wire import frames
from georep.wire import pulsar_wire_pb2 as pb


@pytest.mark.parametrize(
    ("sequence_id", "highest", "messages", "given", "expected"),
    [
        (7, 0, 1, False, 7),  # one message, nothing said
        (10, 0, 5, False, 14),  # C++ client batch: ids 10..14
        (10, 14, 5, True, 14),  # Java client batch: says 14
        (10, 10, 5, True, 10),  # replicator: the whole batch is id 10
        (10, 3, 5, True, 14),  # a given highest below the first id is not trusted
        (0, 0, 0, False, 0),  # a count of 0 counts as one message
    ],
)
def test_highest_sequence_id(sequence_id, highest, messages, given, expected) -> None:
    assert highest_sequence_id(sequence_id, highest, messages, highest_given=given) == expected


class _Cursor:
    def __init__(self, entries):
        self.properties = {}
        self._entries = list(entries)

    async def read_entries(self, count):
        batch, self._entries = self._entries[:count], self._entries[count:]
        return batch


class _Ledger:
    name = "t/ns/persistent/x"

    def __init__(self, entries):
        self._entries = entries

    async def open_cursor(self, name, start):
        return _Cursor(self._entries)


def _stored(name: str, sequence_id: int, batch: int, highest: int | None) -> bytes:
    metadata = pb.MessageMetadata(
        producer_name=name, sequence_id=sequence_id, publish_time=1, num_messages_in_batch=batch
    )
    if highest is not None:
        metadata.highest_sequence_id = highest
    return frames.encode_headers_and_payload(metadata, b"payload")


async def test_recovery_trusts_a_given_highest_sequence_id() -> None:
    entries = [
        ((3, 0), _stored("georep.repl.A", 100, 50, 100)),  # a replicated batch of 50
        ((3, 1), _stored("cpp", 7, 5, None)),  # a C++ batch: 7..11
    ]
    # _Ledger stands in for a TopicLog: it has the name and cursor recovery reads.
    dedup = MessageDeduplication(cast(TopicLog, _Ledger(entries)))
    await dedup.recover()
    assert dedup.persisted == {"georep.repl.A": 100, "cpp": 11}
    assert dedup.check("georep.repl.A", 101) is DupStatus.NEW
    assert dedup.check("georep.repl.A", 100) is DupStatus.DUPLICATE
    assert dedup.check("cpp", 11) is DupStatus.DUPLICATE
