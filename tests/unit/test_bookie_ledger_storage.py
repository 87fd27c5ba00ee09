"""Ledger storage: write cache generations, index encoding, and checkpoints that crash
between any two steps (the journal replay must make up for whatever was lost)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from georep.storage.bookie import journal as journal_module
from georep.storage.bookie.disk_io import DiskFault, DiskWriter
from georep.storage.bookie.journal import Journal, JournalOffset
from georep.storage.bookie.ledger_index import from_sql, to_sql
from georep.storage.bookie.ledger_storage import LedgerStorage
from georep.storage.bookie.write_cache import WriteCache
from georep.storage.entry import verify
from tests.harness.bookie import make_entry


def test_write_cache_generations():
    cache = WriteCache(bytes_max=100)
    cache.put(1, 0, b"a" * 10)
    cache.put(1, 0, b"b" * 20)  # overwrite counts once
    assert cache.bytes == 20
    frozen = cache.freeze()
    assert frozen == {(1, 0): b"b" * 20}
    cache.put(1, 1, b"c" * 30)
    assert cache.get(1, 0) == b"b" * 20 and cache.get(1, 1) == b"c" * 30
    assert cache.bytes == 50 and cache.active_bytes == 30
    cache.put(1, 0, b"d")  # newer than the frozen copy: wins on read and on thaw
    assert cache.get(1, 0) == b"d"
    cache.thaw()
    assert cache.get(1, 0) == b"d" and len(cache) == 2 and cache.bytes == 31
    cache.freeze()
    cache.release()
    assert cache.get(1, 1) is None and cache.bytes == 0
    cache.put(2, 0, b"x" * 100)
    assert cache.full
    cache.remove_ledgers({2})
    assert cache.bytes == 0 and cache.get(2, 0) is None


@pytest.mark.parametrize("ledger_id", [0, 1, 2**63 - 1, 2**63, 2**64 - 1])
def test_ledger_ids_round_trip_through_sqlite_integers(ledger_id):
    assert -(2**63) <= to_sql(ledger_id) < 2**63
    assert from_sql(to_sql(ledger_id)) == ledger_id


async def _journaled_adds(
    storage: LedgerStorage, journal: Journal, ledger: int, entries: range
) -> None:
    """What the server does for each add: apply to storage, journal, wait for the sync."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    remaining = len(entries)

    def waiter(token: object, error: BaseException | None) -> None:
        nonlocal remaining
        assert error is None
        remaining -= 1
        if remaining == 0:
            done.set_result(None)

    for entry_id in entries:
        data = make_entry(ledger, entry_id, b"v%d" % entry_id, lac=entry_id - 1)
        storage.add(ledger, entry_id, data, entry_id - 1)
        journal.append_entry(ledger, entry_id, data, waiter, entry_id)
    await done


def _recover(directory: Path) -> LedgerStorage:
    """A restart after a crash: open the storage, replay the journal from the mark."""
    storage = LedgerStorage(directory)
    mark = storage.open()
    journal_module.replay(directory / "journal", mark, storage.apply)
    return storage


class Crash(Exception):
    pass


@pytest.mark.parametrize("crash_at", ["entry_log", "index", "mark", "none"])
async def test_checkpoint_interrupted_at_any_step_is_made_good_by_replay(
    tmp_path, crash_at, monkeypatch
):
    storage = LedgerStorage(tmp_path)
    storage.open()
    journal = Journal(tmp_path / "journal")
    journal.open()
    journal.start()
    await _journaled_adds(storage, journal, 4, range(10))
    storage.fence(4)
    await storage.checkpoint(lambda: journal.synced_position)  # a good one first
    await _journaled_adds(storage, journal, 4, range(10, 20))
    await _journaled_adds(storage, journal, 4, range(3))  # recovery-style overwrites

    def crash(*_args, **_kwargs):
        raise Crash

    if crash_at == "entry_log":
        monkeypatch.setattr(storage.entry_log, "append_batch", crash)
    elif crash_at == "index":
        monkeypatch.setattr(storage.index, "commit_checkpoint", crash)
    elif crash_at == "mark":
        monkeypatch.setattr(storage, "write_mark", crash)
    if crash_at == "none":
        await storage.checkpoint(lambda: journal.synced_position)
    else:
        with pytest.raises(Crash):
            await storage.checkpoint(lambda: journal.synced_position)
    await journal.close()  # the files stay as they are: nothing else is flushed

    recovered = _recover(tmp_path)
    try:
        for entry_id in range(20):
            assert recovered.read(4, entry_id) == make_entry(
                4, entry_id, b"v%d" % entry_id, lac=entry_id - 1
            )
        state = recovered.state(4)
        assert state is not None
        assert (state.fenced, state.lac, state.last_entry) == (True, 18, 19)
        # And once more through a checkpoint of the recovered state.
        await recovered.checkpoint(lambda: JournalOffset(10**6, 0))
        assert len(recovered.cache) == 0
        for entry_id in range(20):
            assert recovered.read(4, entry_id) is not None
    finally:
        recovered.close()
        storage.close()


@pytest.mark.parametrize("kind", ["enospc", "eio", "short"])
@pytest.mark.parametrize("site", ["entry_log", "index", "mark"])
async def test_a_checkpoint_the_disk_refuses_leaves_nothing_pointing_at_wrong_bytes(
    tmp_path, site, kind
):
    """The probe's corruption: a checkpoint write fails part way, the next one succeeds;
    every entry reads back verified, before and after a restart (no replay needed)."""
    disk = DiskWriter()
    storage = LedgerStorage(tmp_path, disk=disk)
    storage.open()
    for entry_id in range(5):
        storage.add(5, entry_id, make_entry(5, entry_id, b"a%d" % entry_id), entry_id - 1)
    await storage.checkpoint(lambda: JournalOffset(1, 100))
    for entry_id in range(5, 40):
        storage.add(5, entry_id, make_entry(5, entry_id, b"b%d" % entry_id * 50), entry_id - 1)
    disk.fault = DiskFault(kind, site)
    with pytest.raises(OSError):
        await storage.checkpoint(lambda: JournalOffset(1, 200))
    assert storage.read_mark() == JournalOffset(1, 100)  # the mark did not move
    disk.fault = None
    for entry_id in range(40, 45):
        storage.add(5, entry_id, make_entry(5, entry_id, b"c%d" % entry_id), entry_id - 1)
    await storage.checkpoint(lambda: JournalOffset(1, 300))
    assert len(storage.cache) == 0
    storage.close()

    reopened = LedgerStorage(tmp_path)
    assert reopened.open() == JournalOffset(1, 300)
    try:
        for entry_id in range(45):
            data = reopened.read(5, entry_id)
            assert data is not None, entry_id
            verify(data, 5, entry_id)
    finally:
        reopened.close()
