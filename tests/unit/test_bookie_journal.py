"""Journal: record codec, group commit, rolling, and replay over damaged tails."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from georep.storage.bookie import journal as journal_module
from georep.storage.bookie.disk_io import DiskFault, DiskWriter
from georep.storage.bookie.journal import (
    FILE_HEADER_BYTES,
    EntryRecord,
    FenceRecord,
    Journal,
    JournalOffset,
    Record,
    replay,
)
from georep.storage.errors import JournalFailed
from tests.harness.bookie import make_entry

_START = JournalOffset(0, 0)


def _collect(directory: Path, start: JournalOffset = _START):
    records: list[Record] = []
    report = replay(directory, start, records.append)
    return records, report


async def _write(directory: Path, records: list[Record], **options) -> Journal:
    """Write records through a real Journal and wait until all are durable."""
    journal = Journal(directory, **options)
    journal.open()
    journal.start()
    done: list[object] = []

    def waiter(token: object, error: BaseException | None) -> None:
        assert error is None
        done.append(token)

    for index, record in enumerate(records):
        if isinstance(record, EntryRecord):
            journal.append_entry(record.ledger_id, record.entry_id, record.data, waiter, index)
        else:
            journal.append_fence(record.ledger_id, waiter, index)
    await journal.close()
    assert done == list(range(len(records)))
    return journal


def _sample(count: int = 5) -> list[Record]:
    records: list[Record] = []
    for entry_id in range(count):
        records.append(EntryRecord(7, entry_id, make_entry(7, entry_id, b"e%d" % entry_id)))
    records.append(FenceRecord(7))
    return records


def _only_file(directory: Path) -> Path:
    (path,) = sorted(directory.glob("*.jnl"))
    return path


async def test_records_round_trip(tmp_path):
    records = _sample()
    await _write(tmp_path, records)
    replayed, report = _collect(tmp_path)
    assert replayed == records
    assert report.torn_tails == []


async def test_waiters_answered_after_group_is_written(tmp_path):
    journal = Journal(tmp_path, group_wait_ms=50)
    journal.open()
    journal.start()
    answered = asyncio.Event()
    seen: list[int] = []

    def waiter(token: object, error: BaseException | None) -> None:
        # By the time a waiter runs, its record is in the file.
        replayed, _ = _collect(tmp_path)
        seen.append(len(replayed))
        answered.set()

    for entry_id in range(10):
        journal.append_entry(1, entry_id, make_entry(1, entry_id), waiter, entry_id)
    assert journal.queued_count == 10
    await answered.wait()
    await journal.close()
    assert seen == [10] * 10
    assert journal.stats.groups == 1
    assert journal.stats.fsyncs == 1


async def test_group_closes_at_bytes_max(tmp_path):
    data = make_entry(1, 0, b"x" * 1000)
    journal = await _write(
        tmp_path,
        [EntryRecord(1, 0, data)] * 20,
        group_wait_ms=10_000,
        group_bytes_max=4 * len(data),
    )
    assert journal.stats.groups >= 5


async def test_files_roll_and_replay_crosses_files(tmp_path):
    records = [EntryRecord(1, i, make_entry(1, i, b"y" * 500)) for i in range(40)]
    journal = Journal(tmp_path, group_wait_ms=0, group_bytes_max=2000, file_bytes_max=4000)
    journal.open()
    journal.start()
    for index, record in enumerate(records):
        journal.append_entry(1, record.entry_id, record.data, lambda *_: None, index)
        await asyncio.sleep(0)
    await journal.close()
    assert len(list(tmp_path.glob("*.jnl"))) > 3
    replayed, _ = _collect(tmp_path)
    assert replayed == records


async def test_replay_starts_at_mark(tmp_path):
    records = _sample()
    await _write(tmp_path, records[:2])
    path = _only_file(tmp_path)
    mark = JournalOffset(int(path.stem), path.stat().st_size)
    await _write(tmp_path, records[2:])  # a second file
    replayed, _ = _collect(tmp_path, mark)
    assert replayed == records[2:]


async def test_open_never_appends_to_an_old_file(tmp_path):
    await _write(tmp_path, _sample(1))
    await _write(tmp_path, _sample(1))
    assert [p.name for p in sorted(tmp_path.glob("*.jnl"))] == [
        journal_module.file_name(1),
        journal_module.file_name(2),
    ]


def _record_ends(path: Path) -> list[int]:
    buffer = path.read_bytes()
    return [end for _, end in journal_module.parse_records(buffer, FILE_HEADER_BYTES)]


@pytest.mark.parametrize(
    "damage",
    [
        "truncated_mid_record",
        "truncated_mid_header",
        "junk_tail",
        "bad_crc_last",
        "zero_tail",
        "huge_length",
    ],
)
async def test_replay_stops_at_last_whole_record(tmp_path, damage):
    records = _sample()
    await _write(tmp_path, records)
    path = _only_file(tmp_path)
    ends = _record_ends(path)
    buffer = bytearray(path.read_bytes())
    whole = len(records) - 1  # records expected to survive
    if damage == "truncated_mid_record":
        buffer = buffer[: ends[-2] + 12]
    elif damage == "truncated_mid_header":
        buffer = buffer[: ends[-2] + 3]
    elif damage == "junk_tail":
        buffer += b"\x00\x00\x00\x05garbage-after-the-last-record"
        whole = len(records)
    elif damage == "bad_crc_last":
        buffer[ends[-2] + 4] ^= 0xFF
    elif damage == "zero_tail":
        buffer += bytes(4096)
        whole = len(records)
    elif damage == "huge_length":
        buffer += b"\xff\xff\xff\xff" + bytes(20)
        whole = len(records)
    path.write_bytes(bytes(buffer))
    replayed, report = _collect(tmp_path)
    assert replayed == records[:whole]
    assert report.torn_tails


@pytest.mark.parametrize("content", [b"", b"GRJ", b"GRJN\x00\x01\x00\x00", b"NOPE\x00\x01\x00\x00"])
def test_empty_header_only_and_foreign_files_replay_nothing(tmp_path, content):
    (tmp_path / journal_module.file_name(1)).write_bytes(content)
    replayed, _ = _collect(tmp_path)
    assert replayed == []


async def test_torn_file_then_later_file_both_replayed(tmp_path):
    """A crash left file 1 torn; the restarted bookie wrote file 2: both count."""
    records = _sample()
    await _write(tmp_path, records[:3])
    first = _only_file(tmp_path)
    first.write_bytes(first.read_bytes()[:-5])
    await _write(tmp_path, records[3:])
    replayed, _ = _collect(tmp_path)
    assert replayed == records[:2] + records[3:]


def test_remove_files_before_keeps_current(tmp_path):
    for file_id in (1, 2, 3):
        (tmp_path / journal_module.file_name(file_id)).write_bytes(b"")
    journal = Journal(tmp_path)
    journal.open()  # file 4
    assert journal.remove_files_before(3) == 2
    assert sorted(p.name for p in tmp_path.glob("*.jnl")) == [
        journal_module.file_name(3),
        journal_module.file_name(4),
    ]


@pytest.mark.parametrize("kind", ["enospc", "eio", "short"])
async def test_a_failed_group_is_refused_cut_off_and_the_journal_recovers(tmp_path, kind):
    """Acked records replay whole; the failed group's are refused and its bytes gone;
    after recover() the journal takes records again in a fresh file."""
    disk = DiskWriter()
    journal = Journal(tmp_path, disk=disk, group_wait_ms=0)
    journal.open()
    journal.start()

    def waiter(token: object, error: BaseException | None) -> None:
        token.set_result(error)  # type: ignore[attr-defined]

    async def append(entry_id: int) -> BaseException | None:
        data = make_entry(3, entry_id, b"r%d" % entry_id * 100)
        answer = asyncio.get_running_loop().create_future()
        journal.append_entry(3, entry_id, data, waiter, answer)
        return await answer

    for entry_id in range(5):
        assert await append(entry_id) is None
    synced = journal.synced_position
    disk.fault = DiskFault(kind, "journal")
    assert isinstance(await append(5), JournalFailed)
    assert journal.synced_position == synced  # never past what is on disk
    assert isinstance(await append(6), JournalFailed)  # refused while failed
    assert (tmp_path / journal_module.file_name(synced.file_id)).stat().st_size == synced.offset
    assert not await journal.recover()  # the disk still refuses a fresh file
    disk.fault = None
    assert await journal.recover()
    assert await append(7) is None
    assert journal.synced_position.file_id > synced.file_id
    await journal.close()

    records, report = _collect(tmp_path)
    assert [record.entry_id for record in records] == [0, 1, 2, 3, 4, 7]
    assert report.torn_tails == []
