"""Subscription sync, the broker's side: a topic's acknowledgement state read out, and
one subscription's state set from outside, for the gateway's replicated-subscription
sync over the admin REST (``topic_admin.py`` serves both; JSON shapes in
``admin/cluster_admin.py``).

Reading (:func:`sync_state`). For every subscription but the gateway's own (``georep.*``)
and the broker's (``pulsar.*``): the state a consumer would see now, which is the
cursor's: a live :class:`~georep.broker.subscription.Subscription` hands every
acknowledgement to its cursor at once, persisted or not yet. Ranges are closed, their ends
entries of the log, sorted, and merged wherever no entry lies between two of them (also
across ledgers); the lowest ``limits.sync_state_ranges_count_max`` are reported. Batches
are reported with their size, read from each entry's metadata, and the indexes of their
acknowledged members; the lowest ``limits.sync_state_batches_count_max``. What is left
out is flagged (``rangesTruncated``, ``batchesTruncated``); it is what a crash would
forget too, so a reader treating it as unacknowledged only delivers it again.

Writing (:func:`sync_subscription`), in this order, so that a refused request has
changed nothing:

1. batches are checked against their entries (each entry read once): an index at or past
   the batch's size is InvalidArgument. Positions that are not entries are ignored;
2. under the topic's ``subscribe_lock``: the durable cursor is created when missing, its
   MDP just before the entry at or before ``markDelete``, else before the earliest entry;
3. everything is clamped to the log: ``markDelete`` to the last entry at or before it, a
   range to the first and last entries inside it (a range holding none is dropped), so
   nothing past the last entry (an entry still to come) is ever acknowledged;
4. applied: the MDP only moves forward; a range costs one range on the cursor however
   many entries it holds; batch members are merged with what is known. A live
   subscription takes them through ``Subscription.acknowledge_synced`` (its consumers
   and dispatcher forget what they held of them, nobody is disconnected), then waits
   for their persistence (``Subscription.flush``); otherwise the cursor takes them
   directly;
5. the MDP steps over markers: from it, the stretch of acknowledged entries and markers
   is scanned (at most ``limits.subscription_sync_marker_scan_entries_max`` steps; a
   range is one step and is not read, an unacknowledged entry is read alone), and the
   MDP is moved to the last marker of that stretch: a live subscription is handed the
   markers (``Subscription.note_marker``, as its dispatcher hands those it reads), a
   standby cursor is marked deleted up to it. A standby subscription has no dispatcher,
   and without this would sit behind the first marker after its MDP forever.

Worked example, ledger 3 of entries 0..9 with markers at 3:4 and 3:8, a new subscription
``s``: ``{"markDelete": 3:2, "ranges": [[3:5, 3:6]], "batches": [3:7 acked [0, 1] of 2]}``
creates ``s`` at MDP 3:2, acknowledges 3:5..3:6 and the whole batch 3:7; 3:3 is open, so
the scan stops there and the MDP stays 3:2 (``rangesCount`` 1). A second sync with
``ranges [[3:3, 3:3]]`` moves the MDP to 3:3; the scan steps over the marker 3:4, the
range 3:5..3:7 and the marker 3:8, and stops at 3:9: MDP 3:8, ``rangesCount`` 0.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from georep import limits
from georep.broker.consumer import SUB_TYPE_NAMES
from georep.broker.entry import is_georep_name, messages_in, parse_metadata
from georep.broker.errors import NotAllowed
from georep.broker.message_id import all_bits
from georep.broker.ports import SubscriptionCursor, TopicLog
from georep.broker.subscription import Subscription, is_replicated, mark_replicated
from georep.broker.topic import PersistentTopic, SeekTarget, is_system_cursor
from georep.domain.position import Position
from georep.storage.errors import InvalidArgument
from georep.storage.managed_ledger import RangeSet

log = logging.getLogger(__name__)

Range = tuple[Position, Position]


def position_document(position: Iterable[int]) -> dict[str, int]:
    ledger_id, entry_id = position
    return {"ledgerId": int(ledger_id), "entryId": int(entry_id)}


# --- reading ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _View:
    """One subscription's state as a consumer sees it, before batch sizes are known."""

    mark_delete: Position
    ranges: list[Range]
    ranges_truncated: bool
    #: (entry, bits of its members still unacknowledged), lowest first
    batches: list[tuple[Position, int]]
    batches_truncated: bool
    consumers: int
    consumers_attached: int
    replicated: bool
    sub_type: str | None

    def document(self, sizes: Mapping[Position, int]) -> dict[str, Any]:
        batches = []
        for position, bits in self.batches:
            size = sizes.get(position)
            if size is None:
                continue  # not an entry any more (cannot happen above the MDP); left out
            batches.append(
                {
                    **position_document(position),
                    "batchSize": size,
                    "ackedIndexes": acked_indexes(bits, size),
                }
            )
        return {
            "markDelete": position_document(self.mark_delete),
            "ranges": [
                {"first": position_document(low), "last": position_document(high)}
                for low, high in self.ranges
            ],
            "batches": batches,
            "consumers": self.consumers,
            "consumersAttached": self.consumers_attached,
            "replicated": self.replicated,
            "type": self.sub_type,
            "rangesTruncated": self.ranges_truncated,
            "batchesTruncated": self.batches_truncated,
        }


async def sync_state(topic: PersistentTopic) -> dict[str, Any]:
    """The ``GET .../sync-state`` document of a loaded topic (see the module docstring)."""
    ledger = topic.ledger
    last = ledger.last_confirmed
    views = {
        name: _view(topic, name) for name in topic.subscription_names() if not is_georep_name(name)
    }  # taken without an await between: one moment's state
    wanted = sorted({position for view in views.values() for position, _ in view.batches})
    sizes = await batch_sizes(ledger, wanted)
    return {
        "lastPosition": position_document(last) if last is not None else None,
        "subscriptions": {name: view.document(sizes) for name, view in views.items()},
    }


def _live(topic: PersistentTopic, name: str) -> Subscription | None:
    """The loaded Subscription over cursor ``name`` (not a non-durable reader that
    happens to share the name)."""
    live = topic.subscriptions.get(name)
    if live is None or live.cursor is not topic.ledger.cursors.get(name):
        return None
    return live


def _view(topic: PersistentTopic, name: str) -> _View:
    ledger = topic.ledger
    cursor = ledger.cursors[name]
    live = _live(topic, name)
    mark_delete = cursor.mark_delete_position
    ranges = cursor.individually_deleted
    shown, ranges_truncated = _entry_ranges(ledger, ranges, limits.sync_state_ranges_count_max)
    open_batches = cursor.batches  # lowest first, none at or below the MDP or in a range
    batches_max = limits.sync_state_batches_count_max
    sub_type = live.sub_type if live is not None else None
    return _View(
        mark_delete=mark_delete,
        ranges=shown,
        ranges_truncated=ranges_truncated,
        batches=open_batches[:batches_max],
        batches_truncated=len(open_batches) > batches_max,
        consumers=len(live.consumers) if live is not None else 0,
        consumers_attached=live.consumers_attached if live is not None else 0,
        replicated=is_replicated(cursor),
        sub_type=SUB_TYPE_NAMES.get(sub_type) if sub_type is not None else None,
    )


def _entry_ranges(ledger: TopicLog, ranges: RangeSet, count_max: int) -> tuple[list[Range], bool]:
    """``ranges`` with their ends moved onto entries, ranges holding no entry dropped,
    neighbours with no entry between them joined; the lowest ``count_max``, and
    whether more were left out."""
    out: list[Range] = []
    for low, high in ranges:
        span = _on_entries(ledger, low, high)
        if span is None:
            continue
        first, last = span
        if out and ledger.entries_between(out[-1][1], first) == 0:
            out[-1] = (out[-1][0], last)
            continue
        if len(out) == count_max:
            return out, True
        out.append(span)
    return out, False


def _on_entries(ledger: TopicLog, low: Position, high: Position) -> Range | None:
    """The first and last entries inside the closed range ``[low, high]``; None when it
    holds none."""
    first = ledger.position_at_or_after(low)
    last = ledger.entry_at_or_before(high)
    if last is None or first > last:
        return None
    return first, last


def acked_indexes(bits: int, size: int) -> list[int]:
    """Indexes of the members of a batch of ``size`` acknowledged, given the ``bits`` of
    those still unacknowledged (bit i: member i). Example: bits 0b101, size 3 -> [1]."""
    acked = all_bits(size) & ~bits
    text = format(acked, "b")[::-1]
    return [index for index, bit in enumerate(text) if bit == "1"]


def unacked_bits(indexes: Iterable[int], size: int) -> int:
    """The bits of the members of a batch of ``size`` still unacknowledged once
    ``indexes`` are (the inverse of :func:`acked_indexes`)."""
    acked = bytearray((size + 7) // 8)
    for index in indexes:
        acked[index >> 3] |= 1 << (index & 7)
    return all_bits(size) & ~int.from_bytes(acked, "little")


async def batch_sizes(ledger: TopicLog, positions: Sequence[Position]) -> dict[Position, int]:
    """Messages in each entry of ``positions`` (sorted), from its metadata (1 when it
    is not a batch); positions that are not entries are left out. Entries that follow
    one another are read together, ``limits.topic_scan_read_entries_max`` at a time."""
    sizes: dict[Position, int] = {}
    wanted = [p for p in positions if ledger.is_entry(p)]
    index = 0
    while index < len(wanted):
        start = wanted[index]
        end = index + 1
        while (
            end < len(wanted)
            and end - index < limits.topic_scan_read_entries_max
            and wanted[end] == Position(start.ledger_id, start.entry_id + end - index)
        ):
            end += 1
        for position, data in await ledger.read(start, end - index):
            sizes[position] = messages_in(parse_metadata(data))
        index = end
    return {p: sizes[p] for p in wanted if p in sizes}


# --- writing ---------------------------------------------------------------------------
async def sync_subscription(
    topic: PersistentTopic,
    name: str,
    *,
    mark_delete: Position | None,
    ranges: Sequence[Range],
    batches: Mapping[Position, frozenset[int]],
    replicated: bool,
) -> dict[str, Any]:
    """The ``POST .../subscription/{name}/sync`` of a loaded topic (steps in the module
    docstring): ``{"markDelete": ..., "rangesCount": n, "created": bool}``."""
    if is_georep_name(name) or is_system_cursor(name):
        raise InvalidArgument(
            f"subscription {name!r} is the gateway's or the broker's own; it is not synced"
        )
    ledger = topic.ledger
    remaining = await _checked_batches(ledger, batches)
    async with topic.subscribe_lock:
        live = topic.subscriptions.get(name)
        if live is not None and not live.durable:
            raise NotAllowed(f"subscription {name!r} is a non-durable reader; it is not synced")
        target = _clamped_mark_delete(ledger, mark_delete)
        cursor = ledger.cursors.get(name)
        created = cursor is None
        if cursor is None:
            start: SeekTarget = target if target is not None else "earliest"
            cursor = await ledger.open_cursor(name, start=start)
            log.info("%s: subscription %r created by sync", topic.name, name)
        if replicated:
            await mark_replicated(cursor)
        spans = _clamped_ranges(ledger, ranges)
        if live is not None:
            live.acknowledge_synced(target, spans, remaining)
            await live.flush()
        else:
            await _apply_to_cursor(cursor, target, spans, remaining)
        await _step_over_markers(topic, cursor, live)
        return {
            "markDelete": position_document(cursor.mark_delete_position),
            "rangesCount": len(cursor.individually_deleted),
            "created": created,
        }


async def _checked_batches(
    ledger: TopicLog, batches: Mapping[Position, frozenset[int]]
) -> dict[Position, int]:
    """Entry -> bits of its members still unacknowledged once the given indexes are;
    InvalidArgument for an index at or past its batch's size. Not entries, and batches
    naming no index (nothing to acknowledge): left out."""
    sizes = await batch_sizes(ledger, sorted(p for p, indexes in batches.items() if indexes))
    out: dict[Position, int] = {}
    for position, size in sizes.items():
        indexes = batches[position]
        if max(indexes) >= size:
            raise InvalidArgument(
                f"batch {position} holds {size} messages; ackedIndexes names {max(indexes)}"
            )
        out[position] = unacked_bits(indexes, size)
    return out


def _clamped_mark_delete(ledger: TopicLog, mark_delete: Position | None) -> Position | None:
    """The last entry at or before ``mark_delete`` (None: no entry is)."""
    if mark_delete is None:
        return None
    return ledger.entry_at_or_before(mark_delete)


def _clamped_ranges(ledger: TopicLog, ranges: Sequence[Range]) -> list[Range]:
    """Each range's first and last entries; ranges holding no entry dropped."""
    return [span for low, high in ranges if (span := _on_entries(ledger, low, high)) is not None]


async def _apply_to_cursor(
    cursor: SubscriptionCursor,
    mark_delete: Position | None,
    spans: list[Range],
    remaining: dict[Position, int],
) -> None:
    if mark_delete is not None and mark_delete > cursor.mark_delete_position:
        await cursor.mark_delete(mark_delete)
    if spans:
        await cursor.delete_ranges(spans)
    members = {
        position: bits
        for position, bits in remaining.items()
        if not cursor.is_acknowledged(position)
    }
    if members:
        await cursor.delete_batch_members(members)


async def _step_over_markers(
    topic: PersistentTopic, cursor: SubscriptionCursor, live: Subscription | None
) -> None:
    """Move the MDP to the last marker of the stretch after it that holds only
    acknowledged entries and markers (bounded scan; see the module docstring).
    Acknowledged ranges are stepped over without reading them, and only entries nobody
    acknowledged are read, one at a time: the first is nearly always a message, which
    ends the scan. A live subscription is handed the markers as its dispatcher would
    hand them (:meth:`Subscription.note_marker`), which moves its MDP over them."""
    ledger = topic.ledger
    last = ledger.last_confirmed
    position = ledger.next_position(cursor.mark_delete_position)
    found: list[Position] = []
    for _ in range(limits.subscription_sync_marker_scan_entries_max):
        if last is None or position > last:
            break
        covering = cursor.individually_deleted.range_of(position)
        if covering is not None:
            position = ledger.next_position(covering[1])
            continue
        if not cursor.is_acknowledged(position):
            metadata = parse_metadata(await ledger.read_entry(position))
            if metadata is None or not metadata.HasField("marker_type"):
                break  # the first message no one acknowledged: the stretch ends
            found.append(position)
        position = ledger.next_position(position)
    if not found:
        return
    if live is not None:
        for marker in found:
            live.note_marker(marker)
        await live.flush()
    elif found[-1] > cursor.mark_delete_position:
        await cursor.mark_delete(found[-1])
