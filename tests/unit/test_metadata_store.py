"""MetadataStore against real databases: every test runs on a fresh SQLite file and, when
GEOREP_TEST_POSTGRES_URL is set, on a fresh PostgreSQL schema (see tests/conftest.py)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy

from georep import limits
from georep.storage.errors import BadVersion, InvalidArgument, MetadataUnavailable, NoSuchLedger
from georep.storage.meta import migrate
from georep.storage.meta.ledger_metadata import LedgerMetadata, LedgerState
from georep.storage.meta.ledgers import select_ledger
from georep.storage.meta.store import BookieRegistration, MetadataStore

LEASE_S = 10.0
BOOKIES_3 = ("b1", "b2", "b3")


async def _new_ledger(store: MetadataStore, **overrides) -> LedgerMetadata:
    arguments: dict[str, Any] = {
        "ensemble_size": 3,
        "write_quorum": 2,
        "ack_quorum": 2,
        "ensemble": BOOKIES_3,
    }
    arguments.update(overrides)
    return await store.ledgers.create_ledger(**arguments)


# --- URLs ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "driver"),
    [
        ("sqlite:///meta.db", "sqlite+pysqlite"),
        ("sqlite:////var/lib/georep/meta.db", "sqlite+pysqlite"),
        ("postgresql://georep@127.0.0.1:5432/meta", "postgresql+psycopg"),
        ("postgres://georep@db/meta", "postgresql+psycopg"),
        ("postgresql+psycopg://georep:secret@db:5432/meta", "postgresql+psycopg"),
    ],
)
def test_database_url_accepts(url: str, driver: str) -> None:
    assert migrate.database_url(url).drivername == driver


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://",
        "sqlite:///:memory:",
        "mysql://georep@db/meta",
        "postgresql+psycopg2://georep@db/meta",
        "not a url",
    ],
)
async def test_open_rejects_url(url: str) -> None:
    with pytest.raises(InvalidArgument):
        await MetadataStore.open(url)


async def test_open_sqlite_in_missing_directory(tmp_path) -> None:
    with pytest.raises(InvalidArgument, match="does not exist"):
        await MetadataStore.open(f"sqlite:///{tmp_path}/missing/meta.db")


async def test_open_unreachable_postgres_is_unavailable() -> None:
    with pytest.raises(MetadataUnavailable):
        await MetadataStore.open("postgresql://georep@127.0.0.1:1/none?connect_timeout=2")


async def test_open_without_migrate_needs_schema_at_head(metadata_url: str) -> None:
    with pytest.raises(InvalidArgument, match="revision None"):
        await MetadataStore.open(metadata_url, migrate=False)
    await asyncio.to_thread(migrate.upgrade, metadata_url)
    store = await MetadataStore.open(metadata_url, migrate=False)
    await store.close()


async def test_closed_store_refuses_operations(metadata_store: MetadataStore) -> None:
    await metadata_store.close()
    await metadata_store.close()  # idempotent
    with pytest.raises(InvalidArgument, match="closed"):
        await metadata_store.ledgers.list_ledger_ids()


async def test_sqlite_connection_settings(tmp_path) -> None:
    engine = migrate.create_engine(f"sqlite:///{tmp_path}/meta.db")
    try:
        with engine.connect() as connection:
            pragma = connection.exec_driver_sql
            assert pragma("PRAGMA journal_mode").scalar() == "wal"
            assert pragma("PRAGMA synchronous").scalar() == 2  # FULL
            assert pragma("PRAGMA busy_timeout").scalar() == limits.sqlite_busy_timeout_s_max * 1000
            assert pragma("PRAGMA foreign_keys").scalar() == 1
    finally:
        engine.dispose()


# --- ledgers ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("arguments", "custom"),
    [
        pytest.param({"ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1}, None, id="1/1/1"),
        pytest.param({"ensemble_size": 3, "write_quorum": 2, "ack_quorum": 2}, {}, id="3/2/2"),
        pytest.param(
            {"ensemble_size": 5, "write_quorum": 3, "ack_quorum": 2},
            {"topic": "persistent://t/n/a", "ünïcode": "✓"},
            id="5/3/2-custom",
        ),
        pytest.param(
            {"ensemble_size": limits.ensemble_size_max, "write_quorum": 3, "ack_quorum": 1},
            None,
            id="largest-ensemble",
        ),
    ],
)
async def test_create_and_get_ledger(
    metadata_store: MetadataStore, manual_clock, arguments: dict, custom: dict | None
) -> None:
    ensemble = tuple(f"bookie-{index}:3181" for index in range(arguments["ensemble_size"]))
    created = await metadata_store.ledgers.create_ledger(
        **arguments, ensemble=ensemble, custom=custom
    )
    assert created == LedgerMetadata(
        ledger_id=created.ledger_id,
        **arguments,
        ensembles=((0, ensemble),),
        state=LedgerState.OPEN,
        custom=custom or {},
        version=1,
        created_at=manual_clock.now,
    )
    assert await metadata_store.ledgers.get_ledger(created.ledger_id) == created


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"write_quorum": 4}, id="Qw>E"),
        pytest.param({"ack_quorum": 3}, id="Qa>Qw"),
        pytest.param({"ensemble_size": 1, "write_quorum": 1, "ack_quorum": 0}, id="Qa=0"),
        pytest.param({"ensemble_size": 0}, id="E=0"),
        pytest.param({"ensemble_size": True}, id="E-bool"),
        pytest.param({"ensemble": ("b1", "b2")}, id="too-few-bookies"),
        pytest.param({"ensemble": ("b1", "b1", "b2")}, id="duplicate-bookie"),
        pytest.param({"ensemble": "b12"}, id="ensemble-is-a-string"),
        pytest.param({"ensemble": ("b1", "", "b3")}, id="empty-address"),
        pytest.param({"ensemble": ("b1", "x" * 256, "b3")}, id="address-too-long"),
        pytest.param({"custom": {"key": 1}}, id="custom-not-string"),
        pytest.param(
            {"ensemble_size": limits.ensemble_size_max + 1, "ensemble": range(65)},
            id="ensemble-over-max",
        ),
    ],
)
async def test_create_ledger_rejects(metadata_store: MetadataStore, overrides: dict) -> None:
    with pytest.raises(InvalidArgument):
        await _new_ledger(metadata_store, **overrides)
    assert await metadata_store.ledgers.list_ledger_ids() == []


async def test_ledger_ids_ascend_and_are_never_reused(metadata_store: MetadataStore) -> None:
    ids = [(await _new_ledger(metadata_store)).ledger_id for _ in range(3)]
    assert ids == sorted(ids) and len(set(ids)) == 3
    await metadata_store.ledgers.delete_ledger(ids[-1])
    again = (await _new_ledger(metadata_store)).ledger_id
    assert again > ids[-1]
    assert await metadata_store.ledgers.list_ledger_ids() == [*ids[:-1], again]


async def test_get_missing_ledger(metadata_store: MetadataStore) -> None:
    with pytest.raises(NoSuchLedger):
        await metadata_store.ledgers.get_ledger(12345)
    with pytest.raises(InvalidArgument):
        await metadata_store.ledgers.get_ledger(-1)


async def test_delete_ledger_is_idempotent(metadata_store: MetadataStore) -> None:
    ledger = await _new_ledger(metadata_store)
    await metadata_store.ledgers.delete_ledger(ledger.ledger_id)
    await metadata_store.ledgers.delete_ledger(ledger.ledger_id)
    await metadata_store.ledgers.delete_ledger(999_999)
    with pytest.raises(NoSuchLedger):
        await metadata_store.ledgers.get_ledger(ledger.ledger_id)
    assert await metadata_store.ledgers.list_ledger_ids() == []


#: A ledger's life, one CAS per step: recovery, an ensemble change, close, then a
#: replication worker replacing a lost bookie of the closed ledger.
LIFE_STEPS: list[tuple[str, Callable[[LedgerMetadata], LedgerMetadata]]] = [
    ("ensemble change", lambda m: m.with_segment(40, ("b1", "b4", "b3"))),
    ("custom", lambda m: m.replace(custom={"owner": "broker-1"})),
    ("recovery", lambda m: m.replace(state=LedgerState.IN_RECOVERY)),
    ("close", lambda m: m.replace(state=LedgerState.CLOSED, last_entry_id=57, length=5_800)),
    ("re-replicate", lambda m: m.with_bookie_replaced(0, "b2", "b5")),
]


async def test_update_ledger_through_its_life(metadata_store: MetadataStore) -> None:
    metadata = await _new_ledger(metadata_store)
    for step, change in LIFE_STEPS:
        wanted = change(metadata)
        updated = await metadata_store.ledgers.update_ledger(wanted)
        assert updated == wanted.replace(version=metadata.version + 1), step
        assert await metadata_store.ledgers.get_ledger(metadata.ledger_id) == updated, step
        metadata = updated
    assert metadata.version == 1 + len(LIFE_STEPS)


async def test_update_ledger_with_stale_version(metadata_store: MetadataStore) -> None:
    first = await _new_ledger(metadata_store)
    second = await metadata_store.ledgers.update_ledger(
        first.replace(state=LedgerState.IN_RECOVERY)
    )
    with pytest.raises(BadVersion):
        await metadata_store.ledgers.update_ledger(first.replace(custom={"late": "writer"}))
    with pytest.raises(BadVersion):
        await metadata_store.ledgers.update_ledger(second.replace(version=second.version + 1))
    assert await metadata_store.ledgers.get_ledger(first.ledger_id) == second
    assert metadata_store.engine.stats()["cas_conflicts"] == 2


async def test_update_missing_ledger(metadata_store: MetadataStore) -> None:
    ghost = LedgerMetadata(
        ledger_id=4242, ensemble_size=1, write_quorum=1, ack_quorum=1, ensembles=((0, ("b",)),)
    )
    with pytest.raises(NoSuchLedger):
        await metadata_store.ledgers.update_ledger(ghost.replace(version=1))


@pytest.mark.parametrize(
    ("close_first", "change"),
    [
        pytest.param(False, lambda m: m.replace(write_quorum=1, ack_quorum=1), id="quorums"),
        pytest.param(False, lambda m: m.replace(length=-1), id="negative-length"),
        pytest.param(False, lambda m: m.replace(last_entry_id=-2), id="entry-below--1"),
        pytest.param(False, lambda m: m.replace(custom={"n": 1}), id="custom-not-string"),
        pytest.param(True, lambda m: m.replace(state=LedgerState.OPEN), id="reopen-closed"),
        pytest.param(True, lambda m: m.replace(last_entry_id=99), id="move-closed-end"),
        pytest.param(True, lambda m: m.replace(length=1), id="change-closed-length"),
    ],
)
async def test_update_ledger_rejects(
    metadata_store: MetadataStore,
    close_first: bool,
    change: Callable[[LedgerMetadata], LedgerMetadata],
) -> None:
    metadata = await _new_ledger(metadata_store)
    if close_first:
        closed = metadata.replace(state=LedgerState.CLOSED, last_entry_id=9, length=10)
        metadata = await metadata_store.ledgers.update_ledger(closed)
    with pytest.raises(InvalidArgument):
        await metadata_store.ledgers.update_ledger(change(metadata))
    assert await metadata_store.ledgers.get_ledger(metadata.ledger_id) == metadata


async def test_concurrent_updates_one_winner_per_version(metadata_store: MetadataStore) -> None:
    """Each round, 8 tasks CAS the same version: exactly one wins, 7 get BadVersion."""
    tasks_count, rounds = 8, 5
    metadata = await _new_ledger(metadata_store)
    for round_index in range(rounds):
        attempts = [metadata.replace(custom={"winner": str(task)}) for task in range(tasks_count)]
        results = await asyncio.gather(
            *(metadata_store.ledgers.update_ledger(attempt) for attempt in attempts),
            return_exceptions=True,
        )
        winners = [result for result in results if isinstance(result, LedgerMetadata)]
        losers = [result for result in results if isinstance(result, BadVersion)]
        assert len(winners) == 1 and len(losers) == tasks_count - 1, results
        stored = await metadata_store.ledgers.get_ledger(metadata.ledger_id)
        assert stored == winners[0] and stored.version == metadata.version + 1, round_index
        metadata = stored
    assert metadata_store.engine.stats()["cas_conflicts"] == rounds * (tasks_count - 1)


def _increment_in_process(url: str, ledger_id: int, increments: int, start_at: float) -> dict:
    """Child process: CAS ``custom["count"] += 1`` until ``increments`` of them won."""
    return asyncio.run(_increment(url, ledger_id, increments, start_at))


async def _increment(url: str, ledger_id: int, increments: int, start_at: float) -> dict:
    store = await MetadataStore.open(url, migrate=False)
    won: list[int] = []
    conflicts = 0
    await asyncio.sleep(max(0.0, start_at - time.time()))
    try:
        while len(won) < increments:
            metadata = await store.ledgers.get_ledger(ledger_id)
            count = int(metadata.custom["count"])
            try:
                updated = await store.ledgers.update_ledger(
                    metadata.replace(custom={"count": str(count + 1)})
                )
            except BadVersion:
                conflicts += 1
                continue
            won.append(updated.version)
    finally:
        await store.close()
    return {"won": won, "conflicts": conflicts}


@pytest.mark.slow
async def test_processes_contending_on_one_row(metadata_store: MetadataStore) -> None:
    """6 processes CAS one ledger 30 times each: every version from 2 to 181 has exactly
    one winner, no update is lost, and no process sees "database is locked"."""
    processes_count, increments = 6, 30
    metadata = await _new_ledger(metadata_store, custom={"count": "0"})
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(processes_count, mp_context=context) as pool:
        start_at = time.time() + 3.0  # after every child has imported and connected
        futures = [
            pool.submit(
                _increment_in_process,
                metadata_store.engine.url,
                metadata.ledger_id,
                increments,
                start_at,
            )
            for _ in range(processes_count)
        ]
        results = await asyncio.gather(*(asyncio.wrap_future(future) for future in futures))
    won = sorted(version for result in results for version in result["won"])
    total = processes_count * increments
    assert won == list(range(2, 2 + total))
    final = await metadata_store.ledgers.get_ledger(metadata.ledger_id)
    assert final.version == 1 + total and final.custom == {"count": str(total)}


# --- group commit (SQLite) ---------------------------------------------------------
async def _queued_behind_a_busy_writer(
    store: MetadataStore, writes: list[Callable[[], Any]]
) -> list[Any]:
    """Run ``writes`` (each making one awaitable) as one group: the engine's writer thread
    is held by a write of its own until all of them are queued. Their outcomes, errors
    as values."""
    started, release = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(30)

    holding = asyncio.ensure_future(store.engine.write(hold))
    assert await asyncio.to_thread(started.wait, 30)
    tasks = [asyncio.ensure_future(write()) for write in writes]
    for _ in range(5):  # each task queues its write in its first step
        await asyncio.sleep(0)
    release.set()
    await holding
    return await asyncio.gather(*tasks, return_exceptions=True)


def _committed_versions(path: str, ledger_ids: list[int]) -> list[int]:
    """The versions another connection reads: what is committed."""
    connection = sqlite3.connect(path)
    try:
        query = (
            f"SELECT version FROM ledgers WHERE ledger_id IN ({','.join('?' * len(ledger_ids))})"
        )
        return [
            version for (version,) in connection.execute(f"{query} ORDER BY ledger_id", ledger_ids)
        ]
    finally:
        connection.close()


async def test_group_commit_a_stale_write_leaves_the_others_of_its_group_committed(
    tmp_path,
) -> None:
    path = str(tmp_path / "meta.db")
    store = await MetadataStore.open(f"sqlite:///{path}")
    try:
        first, stale, last = [await _new_ledger(store) for _ in range(3)]
        ids = [first.ledger_id, last.ledger_id]

        def versions_seen() -> tuple[list[int], list[int]]:
            # Last of the group: it sees the group's changes, nobody else does yet.
            with store.engine.reading() as connection:
                in_group = [select_ledger(connection, ledger_id).version for ledger_id in ids]
            return in_group, _committed_versions(path, ids)

        outcomes = await _queued_behind_a_busy_writer(
            store,
            [
                lambda: store.ledgers.update_ledger(first.replace(custom={"k": "first"})),
                lambda: store.ledgers.update_ledger(stale.replace(version=7, custom={"k": "x"})),
                lambda: store.ledgers.update_ledger(last.replace(custom={"k": "last"})),
                lambda: store.engine.write(versions_seen),
            ],
        )
        assert isinstance(outcomes[1], BadVersion)
        assert [outcomes[0].version, outcomes[2].version] == [2, 2]
        assert outcomes[3] == ([2, 2], [1, 1])  # one transaction, not yet committed then
        assert _committed_versions(path, ids) == [2, 2]
        assert dict((await store.ledgers.get_ledger(first.ledger_id)).custom) == {"k": "first"}
        assert dict((await store.ledgers.get_ledger(last.ledger_id)).custom) == {"k": "last"}
        assert await store.ledgers.get_ledger(stale.ledger_id) == stale
        assert store.engine.stats()["cas_conflicts"] == 1
    finally:
        await store.close()


async def test_group_commit_a_database_error_fails_only_its_write(tmp_path) -> None:
    """A write whose SQL fails may lose the group's transaction: it alone gets the error
    (as MetadataUnavailable); the others of its group run again and are committed."""
    store = await MetadataStore.open(f"sqlite:///{tmp_path / 'meta.db'}")
    try:
        ledger = await _new_ledger(store)

        def broken() -> None:
            with store.engine.writing() as connection:
                connection.execute(sqlalchemy.text("UPDATE no_such_table SET x = 1"))

        outcomes = await _queued_behind_a_busy_writer(
            store,
            [
                lambda: _new_ledger(store),
                lambda: store.ledgers.update_ledger(ledger.replace(version=9)),
                lambda: store.engine.write(broken),
                lambda: store.ledgers.update_ledger(ledger.replace(custom={"k": "v"})),
            ],
        )
        assert isinstance(outcomes[1], BadVersion)
        assert isinstance(outcomes[2], MetadataUnavailable)
        created, updated = outcomes[0], outcomes[3]
        assert await store.ledgers.get_ledger(created.ledger_id) == created
        assert await store.ledgers.get_ledger(ledger.ledger_id) == updated
        assert updated.version == 2
        assert store.engine.stats()["unavailable"] == 1
        assert store.engine.stats()["cas_conflicts"] == 1
    finally:
        await store.close()


# --- bookies ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("elapsed_s", "alive"),
    [(0.0, True), (9.999, True), (LEASE_S, False), (LEASE_S + 60, False)],
)
async def test_bookie_lease_expiry(
    metadata_store: MetadataStore, manual_clock, elapsed_s: float, alive: bool
) -> None:
    registered_at = manual_clock.now
    await metadata_store.bookies.register_bookie("b1:3181", LEASE_S)
    manual_clock.advance(elapsed_s)
    registration = BookieRegistration("b1:3181", registered_at, registered_at + LEASE_S)
    assert await metadata_store.bookies.list_bookies() == ([registration] if alive else [])
    assert await metadata_store.bookies.list_bookies(alive_only=False) == [registration]


async def test_bookie_register_renew_unregister(
    metadata_store: MetadataStore, manual_clock
) -> None:
    start = manual_clock.now
    for address in ("b3", "b1", "b2"):
        await metadata_store.bookies.register_bookie(address, LEASE_S)
    assert [b.address for b in await metadata_store.bookies.list_bookies()] == ["b1", "b2", "b3"]

    manual_clock.advance(8)
    await metadata_store.bookies.renew_bookie("b1", LEASE_S)  # keeps registered_at
    await metadata_store.bookies.register_bookie("b2", LEASE_S)  # a new registration
    manual_clock.advance(4)  # b3's lease ran out
    assert await metadata_store.bookies.list_bookies() == [
        BookieRegistration("b1", start, start + 8 + LEASE_S),
        BookieRegistration("b2", start + 8, start + 8 + LEASE_S),
    ]
    await metadata_store.bookies.renew_bookie("b3", LEASE_S)  # renewing an expired lease revives it
    await metadata_store.bookies.renew_bookie("b4", LEASE_S)  # renewing the unknown registers it
    assert [b.address for b in await metadata_store.bookies.list_bookies()] == [
        "b1",
        "b2",
        "b3",
        "b4",
    ]

    await metadata_store.bookies.unregister_bookie("b2")
    await metadata_store.bookies.unregister_bookie("b2")
    assert [b.address for b in await metadata_store.bookies.list_bookies(alive_only=False)] == [
        "b1",
        "b3",
        "b4",
    ]


@pytest.mark.parametrize(
    ("address", "lease_s"),
    [("", LEASE_S), ("x" * 256, LEASE_S), ("b1", 0), ("b1", -1), ("b1", float("inf"))],
)
async def test_bookie_registration_rejects(
    metadata_store: MetadataStore, address: str, lease_s: float
) -> None:
    with pytest.raises(InvalidArgument):
        await metadata_store.bookies.register_bookie(address, lease_s)


# --- under-replicated ledgers -------------------------------------------------------
async def test_mark_underreplicated_merges(metadata_store: MetadataStore, manual_clock) -> None:
    ledger = await _new_ledger(metadata_store)
    first_mark = manual_clock.now
    await metadata_store.under_replication.mark_underreplicated(ledger.ledger_id, ["b2"])
    manual_clock.advance(5)
    await metadata_store.under_replication.mark_underreplicated(ledger.ledger_id, {"b3", "b2"})
    await metadata_store.under_replication.mark_underreplicated(
        ledger.ledger_id, ["b3"]
    )  # no change
    [marker] = await metadata_store.under_replication.list_underreplicated()
    assert marker.ledger_id == ledger.ledger_id
    assert marker.lost_bookies == {"b2", "b3"}
    assert marker.marked_at == first_mark
    assert (marker.lock_holder, marker.lock_expires_at, marker.version) == (None, None, 2)


@pytest.mark.parametrize(
    ("ledger_exists", "lost", "error"),
    [(False, ["b1"], NoSuchLedger), (True, [], InvalidArgument), (True, "b1", InvalidArgument)],
)
async def test_mark_underreplicated_rejects(
    metadata_store: MetadataStore, ledger_exists: bool, lost, error: type[Exception]
) -> None:
    ledger_id = (await _new_ledger(metadata_store)).ledger_id if ledger_exists else 777
    with pytest.raises(error):
        await metadata_store.under_replication.mark_underreplicated(ledger_id, lost)
    assert await metadata_store.under_replication.list_underreplicated() == []


async def test_lock_takes_oldest_marked_first(metadata_store: MetadataStore, manual_clock) -> None:
    ledgers = [await _new_ledger(metadata_store) for _ in range(3)]
    for ledger in reversed(ledgers):  # the last ledger is marked first
        await metadata_store.under_replication.mark_underreplicated(ledger.ledger_id, ["b1"])
        manual_clock.advance(1)
    order = [m.ledger_id for m in await metadata_store.under_replication.list_underreplicated()]
    assert order == [ledger.ledger_id for ledger in reversed(ledgers)]
    taken = []
    while (
        marker := await metadata_store.under_replication.lock_underreplicated("w", 60)
    ) is not None:
        assert marker.lock_holder == "w" and marker.lock_expires_at == manual_clock.now + 60
        taken.append(marker.ledger_id)
    assert taken == order


async def test_lock_excludes(metadata_store: MetadataStore) -> None:
    first, second = [await _new_ledger(metadata_store) for _ in range(2)]
    for ledger in (first, second):
        await metadata_store.under_replication.mark_underreplicated(ledger.ledger_id, ["b1"])
    marker = await metadata_store.under_replication.lock_underreplicated(
        "w", 60, exclude={first.ledger_id}
    )
    assert marker is not None and marker.ledger_id == second.ledger_id
    both = [first.ledger_id, second.ledger_id]
    assert (
        await metadata_store.under_replication.lock_underreplicated("w", 60, exclude=both) is None
    )


async def test_lock_by_two_holders_only_one_gets_it(metadata_store: MetadataStore) -> None:
    ledger = await _new_ledger(metadata_store)
    await metadata_store.under_replication.mark_underreplicated(ledger.ledger_id, ["b2"])
    results = await asyncio.gather(
        *(
            metadata_store.under_replication.lock_underreplicated(f"worker-{n}", 60)
            for n in range(6)
        )
    )
    locked = [result for result in results if result is not None]
    assert len(locked) == 1
    [marker] = await metadata_store.under_replication.list_underreplicated()
    assert marker.lock_holder == locked[0].lock_holder
    assert marker.version == locked[0].version == 2


async def test_expired_lock_is_taken_over(metadata_store: MetadataStore, manual_clock) -> None:
    ledger = await _new_ledger(metadata_store)
    await metadata_store.under_replication.mark_underreplicated(ledger.ledger_id, ["b2"])
    assert await metadata_store.under_replication.lock_underreplicated("w1", 60) is not None
    manual_clock.advance(59.5)
    assert await metadata_store.under_replication.lock_underreplicated("w2", 60) is None
    manual_clock.advance(0.5)  # expiry reached: the lock is free
    taken = await metadata_store.under_replication.lock_underreplicated("w2", 60)
    assert taken is not None and taken.lock_holder == "w2"
    with pytest.raises(BadVersion):  # w1 lost the lock: its work is not recorded
        await metadata_store.under_replication.complete_underreplicated(
            ledger.ledger_id, "w1", replicated=["b2"]
        )
    await metadata_store.under_replication.unlock_underreplicated(
        ledger.ledger_id, "w1"
    )  # not w1's: no-op
    [marker] = await metadata_store.under_replication.list_underreplicated()
    assert (marker.lock_holder, marker.lost_bookies) == ("w2", frozenset({"b2"}))


async def test_unlock(metadata_store: MetadataStore) -> None:
    ledger = await _new_ledger(metadata_store)
    await metadata_store.under_replication.mark_underreplicated(ledger.ledger_id, ["b2"])
    await metadata_store.under_replication.lock_underreplicated("w1", 60)
    await metadata_store.under_replication.unlock_underreplicated(ledger.ledger_id, "w1")
    [marker] = await metadata_store.under_replication.list_underreplicated()
    assert (marker.lock_holder, marker.lock_expires_at) == (None, None)
    taken = await metadata_store.under_replication.lock_underreplicated("w2", 60)
    assert taken is not None and taken.lock_holder == "w2"
    await metadata_store.under_replication.unlock_underreplicated(999, "w2")  # no marker: no-op


@pytest.mark.parametrize(
    ("lost", "replicated", "remaining"),
    [
        pytest.param({"b1", "b2"}, {"b1", "b2"}, None, id="all"),
        pytest.param({"b1", "b2"}, {"b1", "b2", "b9"}, None, id="all-and-more"),
        pytest.param({"b1", "b2"}, {"b2"}, {"b1"}, id="some"),
        pytest.param({"b1", "b2"}, set(), {"b1", "b2"}, id="none"),
    ],
)
async def test_complete_underreplicated(
    metadata_store: MetadataStore, lost: set, replicated: set, remaining: set | None
) -> None:
    ledger = await _new_ledger(metadata_store)
    await metadata_store.under_replication.mark_underreplicated(ledger.ledger_id, lost)
    assert await metadata_store.under_replication.lock_underreplicated("w1", 60) is not None
    await metadata_store.under_replication.complete_underreplicated(
        ledger.ledger_id, "w1", replicated=replicated
    )
    markers = await metadata_store.under_replication.list_underreplicated()
    if remaining is None:
        assert markers == []
    else:
        [marker] = markers
        assert marker.lost_bookies == remaining and marker.lock_holder is None
    # A second completion finds the marker gone or unlocked.
    if remaining is None:
        await metadata_store.under_replication.complete_underreplicated(
            ledger.ledger_id, "w1", replicated=lost
        )
    else:
        with pytest.raises(BadVersion):
            await metadata_store.under_replication.complete_underreplicated(
                ledger.ledger_id, "w1", replicated=lost
            )


async def test_marked_again_while_locked(metadata_store: MetadataStore) -> None:
    """A bookie lost during repair stays in the set: completing the first one unlocks."""
    ledger = await _new_ledger(metadata_store)
    await metadata_store.under_replication.mark_underreplicated(ledger.ledger_id, ["b1"])
    await metadata_store.under_replication.lock_underreplicated("w1", 60)
    await metadata_store.under_replication.mark_underreplicated(ledger.ledger_id, ["b2"])
    await metadata_store.under_replication.complete_underreplicated(
        ledger.ledger_id, "w1", replicated=["b1"]
    )
    [marker] = await metadata_store.under_replication.list_underreplicated()
    assert marker.lost_bookies == {"b2"} and marker.lock_holder is None


async def test_deleting_a_ledger_deletes_its_marker(metadata_store: MetadataStore) -> None:
    kept, deleted = [await _new_ledger(metadata_store) for _ in range(2)]
    for ledger in (kept, deleted):
        await metadata_store.under_replication.mark_underreplicated(ledger.ledger_id, ["b1"])
    await metadata_store.ledgers.delete_ledger(deleted.ledger_id)
    assert [m.ledger_id for m in await metadata_store.under_replication.list_underreplicated()] == [
        kept.ledger_id
    ]


# --- leases -------------------------------------------------------------------------
#: (seconds to advance first, operation, holder, expected result), run in order with
#: leases of LEASE_S seconds on one name.
LEASE_SCRIPT = [
    (0, "acquire", "a", True),
    (0, "holder", None, "a"),
    (0, "acquire", "b", False),
    (5, "acquire", "a", True),  # renewed at t=5: held until t=15
    (9, "acquire", "b", False),  # t=14
    (0, "holder", None, "a"),
    (1, "holder", None, None),  # t=15: expired
    (0, "acquire", "b", True),  # taken over
    (0, "release", "a", None),  # not a's: no-op
    (0, "holder", None, "b"),
    (0, "release", "b", None),
    (0, "holder", None, None),
    (0, "acquire", "a", True),
]


async def test_lease_script(metadata_store: MetadataStore, manual_clock) -> None:
    for step, (advance_s, operation, holder, expected) in enumerate(LEASE_SCRIPT):
        manual_clock.advance(advance_s)
        result: bool | str | None
        if operation == "acquire":
            assert holder is not None
            result = await metadata_store.leases.acquire_lease("auditor", holder, LEASE_S)
        elif operation == "release":
            assert holder is not None
            await metadata_store.leases.release_lease("auditor", holder)
            result = None
        else:
            result = await metadata_store.leases.lease_holder("auditor")
        assert result == expected, f"step {step}: {operation} {holder}"


async def test_leases_are_independent_by_name(metadata_store: MetadataStore) -> None:
    assert await metadata_store.leases.acquire_lease("auditor", "a", LEASE_S)
    assert await metadata_store.leases.acquire_lease("topic/t1", "b", LEASE_S)
    assert await metadata_store.leases.lease_holder("auditor") == "a"
    assert await metadata_store.leases.lease_holder("topic/t1") == "b"
    assert await metadata_store.leases.lease_holder("topic/none") is None


async def test_concurrent_lease_acquisition_one_winner(metadata_store: MetadataStore) -> None:
    results = await asyncio.gather(
        *(metadata_store.leases.acquire_lease("auditor", f"h{n}", LEASE_S) for n in range(8))
    )
    assert results.count(True) == 1
    assert await metadata_store.leases.lease_holder("auditor") == f"h{results.index(True)}"


@pytest.mark.parametrize(
    ("name", "holder", "lease_s"),
    [("", "a", 1.0), ("n", "", 1.0), ("n", "a", 0.0), ("n", "a", float("nan"))],
)
async def test_lease_rejects(metadata_store: MetadataStore, name, holder, lease_s) -> None:
    with pytest.raises(InvalidArgument):
        await metadata_store.leases.acquire_lease(name, holder, lease_s)


# --- stats --------------------------------------------------------------------------
async def test_stats_count_operations(metadata_store: MetadataStore) -> None:
    before = metadata_store.engine.stats()["operations"]
    ledger = await _new_ledger(metadata_store)
    await metadata_store.ledgers.get_ledger(ledger.ledger_id)
    await metadata_store.bookies.list_bookies()
    assert metadata_store.engine.stats() == {
        "operations": before + 3,
        "cas_conflicts": 0,
        "unavailable": 0,
    }


async def test_database_errors_are_unavailable(tmp_path) -> None:
    url = f"sqlite:///{tmp_path}/meta.db"
    store = await MetadataStore.open(url)
    try:
        engine = migrate.create_engine(url)
        with engine.begin() as connection:
            connection.execute(sqlalchemy.text("DROP TABLE leases"))
        engine.dispose()
        with pytest.raises(MetadataUnavailable):
            await store.leases.lease_holder("auditor")
        assert store.engine.stats()["unavailable"] == 1
    finally:
        await store.close()
