"""Producer deduplication: each (producer name, sequence id) is stored at most once.

Pulsar's rule, per topic: for each producer name the broker keeps the highest sequence id
*pushed* (handed to storage) and the highest *persisted* (storage confirmed). A SEND whose
first sequence id is at or below the pushed one is a duplicate:

- at or below the persisted one: answered at once with a receipt for message id
  (-1, -1), and not stored;
- above it (the original is still in flight): answered when the original is persisted,
  or refused if the original failed.

A batch carries its first id in ``sequence_id`` and its last in ``highest_sequence_id``;
the batch is a duplicate when its first id was pushed before, and pushes its last id. A
``highest_sequence_id`` the sender set is trusted; when unset it is inferred from the
message count (:func:`highest_sequence_id`).

Surviving restarts: every ``limits.dedup_snapshot_entries_interval`` entries (and when the
topic closes) the persisted map is written as the properties of cursor ``pulsar.dedup``
(Pulsar's name for it) together with a mark-delete at the last entry the snapshot
covers. On load the properties are read back and the entries after the cursor's MDP are
scanned, taking each entry's producer name and highest sequence id from its metadata, so
at most about one interval of entries is read. Worked example: snapshot {a: 41} at (3,999),
then entries (3,1000) a/42 and (3,1001) b/7 and a crash: on load {a: 41} plus the scan
gives {a: 42, b: 7}, and a resent a/42 is answered as a duplicate.

Producer names are bounded by ``limits.dedup_producers_count_max``: past it, the name
updated longest ago whose producer is not connected is forgotten (a producer coming back
under a forgotten name is no longer deduplicated against its old sequence ids).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable

from georep import limits
from georep.broker.entry import parse_metadata
from georep.broker.ports import SubscriptionCursor, TopicLog
from georep.domain.position import Position

log = logging.getLogger(__name__)

CURSOR_NAME = "pulsar.dedup"


class DupStatus(enum.Enum):
    NEW = "new"
    #: Already persisted: answer with message id (-1, -1).
    DUPLICATE = "duplicate"
    #: Pushed, not yet persisted: answer once the original is.
    IN_FLIGHT = "in-flight"


class MessageDeduplication:
    def __init__(
        self, ledger: TopicLog, *, is_connected: Callable[[str], bool] = lambda _name: False
    ) -> None:
        self._ledger = ledger
        self._is_connected = is_connected
        self._cursor: SubscriptionCursor | None = None
        #: name -> highest sequence id pushed / persisted; dict order = least recently
        #: updated first.
        self.pushed: dict[str, int] = {}
        self.persisted: dict[str, int] = {}
        self._waiters: list[tuple[str, int, asyncio.Future[None]]] = []
        self._entries_since_snapshot = 0
        self._snapshot_task: asyncio.Task[None] | None = None
        self.stats = {"duplicates": 0, "snapshots": 0, "recovered_entries": 0}

    # -- recovery and snapshots --

    async def recover(self) -> None:
        """Read the snapshot and scan the entries after it."""
        cursor = self._cursor = await self._ledger.open_cursor(CURSOR_NAME, start="earliest")
        for name, value in dict(cursor.properties).items():
            self.persisted[str(name)] = int(value)
        scanned = 0
        while True:
            batch = await cursor.read_entries(limits.topic_scan_read_entries_max)
            if not batch:
                break
            for _position, data in batch:
                metadata = parse_metadata(data)
                if metadata is None:
                    continue
                highest = highest_sequence_id(
                    metadata.sequence_id,
                    metadata.highest_sequence_id,
                    metadata.num_messages_in_batch,
                    highest_given=metadata.HasField("highest_sequence_id"),
                )
                self._raise(self.persisted, metadata.producer_name, highest)
            scanned += len(batch)
        self.pushed = dict(self.persisted)
        self._entries_since_snapshot = scanned
        self.stats["recovered_entries"] = scanned
        if scanned:
            log.info(
                "dedup state of %s rebuilt from a scan of %d entries", self._ledger.name, scanned
            )

    async def snapshot(self, position: Position | None = None) -> None:
        """Persist the current persisted map, covering entries up to ``position`` (the
        last confirmed entry when None)."""
        if self._cursor is None:
            return
        if position is None:
            position = self._ledger.last_confirmed
        if position is None:
            return
        if position <= self._cursor.mark_delete_position:
            return
        properties = {name: str(value) for name, value in self.persisted.items()}
        await self._cursor.mark_delete(position, properties=properties)
        self._entries_since_snapshot = 0
        self.stats["snapshots"] += 1

    async def close(self) -> None:
        if self._snapshot_task is not None:
            await asyncio.gather(self._snapshot_task, return_exceptions=True)
        try:
            await self.snapshot()
        except Exception as error:  # the next load rebuilds from a longer scan
            log.warning("dedup snapshot of %s at close failed: %s", self._ledger.name, error)

    # -- the publish path --

    def check(self, name: str, sequence_id: int) -> DupStatus:
        pushed = self.pushed.get(name)
        if pushed is None or sequence_id > pushed:
            return DupStatus.NEW
        self.stats["duplicates"] += 1
        persisted = self.persisted.get(name, -1)
        return DupStatus.DUPLICATE if sequence_id <= persisted else DupStatus.IN_FLIGHT

    def record_pushed(self, name: str, highest_sequence_id: int) -> None:
        self._raise(self.pushed, name, highest_sequence_id)

    def record_persisted(self, name: str, highest_sequence_id: int, position: Position) -> None:
        self._raise(self.persisted, name, highest_sequence_id)
        if self._waiters:
            self._release_waiters()
        self._entries_since_snapshot += 1
        if self._entries_since_snapshot >= limits.dedup_snapshot_entries_interval and (
            self._snapshot_task is None or self._snapshot_task.done()
        ):
            self._entries_since_snapshot = 0
            self._snapshot_task = asyncio.get_running_loop().create_task(
                self._snapshot_quietly(position)
            )

    def wait_persisted(self, name: str, sequence_id: int) -> asyncio.Future[None]:
        """A future done when ``sequence_id`` of ``name`` is persisted; failed by
        :meth:`reset_pushed` if its write failed."""
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((name, sequence_id, future))
        return future

    def reset_pushed(self, error: BaseException) -> None:
        """After a failed write: what was pushed and not persisted was not stored."""
        self.pushed = dict(self.persisted)
        waiters, self._waiters = self._waiters, []
        for _name, _sequence_id, future in waiters:
            if not future.done():
                future.set_exception(error)

    def _release_waiters(self) -> None:
        still = []
        for name, sequence_id, future in self._waiters:
            if future.done():
                continue
            if sequence_id <= self.persisted.get(name, -1):
                future.set_result(None)
            else:
                still.append((name, sequence_id, future))
        self._waiters = still

    async def _snapshot_quietly(self, position: Position) -> None:
        try:
            await self.snapshot(position)
        except Exception as error:
            log.warning("dedup snapshot of %s failed: %s", self._ledger.name, error)

    def _raise(self, table: dict[str, int], name: str, sequence_id: int) -> None:
        current = table.pop(name, None)
        table[name] = sequence_id if current is None else max(current, sequence_id)
        if len(table) > limits.dedup_producers_count_max:
            self._forget_one(table)

    def _forget_one(self, table: dict[str, int]) -> None:
        for name in table:
            if not self._is_connected(name):
                del table[name]
                return
        del table[next(iter(table))]


def highest_sequence_id(
    sequence_id: int, highest: int, messages: int, *, highest_given: bool = False
) -> int:
    """The last sequence id an entry carries.

    When the sender sets ``highest_sequence_id`` (the Java client, georep's replicator) it
    is trusted, as Pulsar does: the gateway's replicator sends a whole stored batch under
    one sequence id (its origin position) and says so with ``highest_sequence_id`` equal
    to it, so the next entry's id, one higher, is not taken for a duplicate. The C++
    client never sets it: a batch of n then carries ids ``sequence_id .. sequence_id + n -
    1`` (the client numbers messages consecutively), so that is its highest. The same rule
    applies to a SEND (``producer.py``) and to stored metadata when the state is rebuilt.

    >>> highest_sequence_id(10, 0, 5), highest_sequence_id(10, 10, 5, highest_given=True)
    (14, 10)
    """
    if highest_given and highest >= sequence_id:
        return highest
    return max(sequence_id, highest, sequence_id + max(1, messages) - 1)
