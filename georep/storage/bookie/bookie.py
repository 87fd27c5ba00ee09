"""The bookie: one storage node. Wires journal, ledger storage and server together, and
runs the background duties (checkpoints, garbage collection, registration lease).

Start-up: lock the data directory, open the index and entry logs, replay the journal
from the checkpoint mark, start a fresh journal file, checkpoint what was replayed (so
the old files, perhaps with a torn tail, are left behind), then listen and register.

Full disks (:mod:`~georep.storage.bookie.ledger_dirs_monitor`): every
``disk_check_interval_s`` the bookie measures its disk; above the read-only threshold,
or while its journal or its last checkpoint failed, it refuses normal adds with the
reason (clients move the ledger to another bookie), and it takes them again by itself:
below the writable mark it reopens a failed journal and retries the checkpoint. It
also starts on a full disk (read-only, the journal kept) and keeps serving reads.

Stop: stop accepting and reading, let the journal commit and answer what it holds,
close the connections, checkpoint, close files, unregister.

Garbage collection (only with a metadata store), every ``gc_interval_s``: a ledger this
bookie holds is collected when it is absent from ``ledgers.list_ledger_ids()`` AND its id
is below the highest id the store lists. Ledger ids are allocated increasing, so a
ledger below the highest listed id that is not listed was created and then deleted;
a ledger at or above it may be one whose metadata is being created right now (its
entries can reach a bookie before another ledger is created), so it is kept. The cost
of this rule: the newest ledgers are collected only once a newer ledger exists.
Example: the bookie holds 3, 5, 9 and the store lists [4, 5, 8]: 3 is collected, 5 is
live, 9 is kept (it may be brand new). Collected ledgers leave the cache and the index;
entry logs with no live ledger left are deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from georep import limits
from georep.invariant import invariant, present
from georep.runtime.awaiting import within
from georep.storage.bookie import journal as journal_module
from georep.storage.bookie.disk_io import DiskWriter
from georep.storage.bookie.journal import Journal
from georep.storage.bookie.ledger_dirs_monitor import (
    Availability,
    BookieAvailability,
    DiskState,
    DiskThresholds,
    measure,
)
from georep.storage.bookie.ledger_storage import LedgerStorage
from georep.storage.bookie.server import PRESSURE, BookieServer
from georep.storage.errors import StorageError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from georep.storage.meta.bookies import BookieRepository
    from georep.storage.meta.ledgers import LedgerRepository
    from georep.storage.meta.store import MetadataStore

log = logging.getLogger(__name__)

LOCK_FILE = "bookie.lock"


class DataDirectoryInUse(StorageError):
    """Another bookie holds this data directory."""


@dataclass
class BookieConfig:
    data_dir: Path
    host: str = "127.0.0.1"
    #: 0 = any free port
    port: int = 0
    metadata_url: str | None = None
    journal_group_wait_ms: float = limits.journal_group_wait_ms_default
    journal_group_bytes_max: int = limits.journal_group_bytes_max
    #: False skips every fsync: for tests and benchmarks only, loses acknowledged data
    #: on power loss.
    fsync: bool = True
    checkpoint_interval_s: float = limits.checkpoint_interval_s_default
    gc_interval_s: float = limits.gc_interval_s_default
    lease_s: float = limits.bookie_lease_s_default
    fault_injection: bool = False
    disk_usage_warn_fraction: float = limits.disk_usage_warn_fraction_default
    disk_usage_read_only_fraction: float = limits.disk_usage_read_only_fraction_default
    disk_usage_writable_fraction: float = limits.disk_usage_writable_fraction_default
    disk_check_interval_s: float = limits.disk_check_interval_s_default

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir)
        # Raises DiskThresholdsInvalid (a StorageError) for thresholds out of order.
        self.disk_thresholds()
        invariant(self.disk_check_interval_s > 0, "disk_check_interval_s must be positive")
        invariant(0 <= self.port <= 65535, f"port {self.port} out of range")
        invariant(self.journal_group_wait_ms >= 0, "journal_group_wait_ms must be >= 0")
        invariant(
            0 < self.journal_group_bytes_max <= limits.journal_group_bytes_max,
            "journal_group_bytes_max out of range",
        )
        invariant(
            self.checkpoint_interval_s > 0 and self.gc_interval_s > 0 and self.lease_s > 0,
            "intervals must be positive",
        )

    def disk_thresholds(self) -> DiskThresholds:
        return DiskThresholds(
            self.disk_usage_warn_fraction,
            self.disk_usage_read_only_fraction,
            self.disk_usage_writable_fraction,
        )


class Bookie:
    def __init__(
        self,
        config: BookieConfig,
        *,
        bookies: BookieRepository | None = None,
        ledgers: LedgerRepository | None = None,
    ) -> None:
        """``bookies`` (its registration) and ``ledgers`` (garbage collection) come
        together or not at all; without them a ``config.metadata_url`` is opened."""
        invariant(
            (bookies is None) == (ledgers is None), "a bookie takes both repositories or neither"
        )
        self.config = config
        self._bookies = bookies
        self._ledgers = ledgers
        self._own_store: MetadataStore | None = None
        self._lock_fd = -1
        self._address = ""
        self._started_at = 0.0
        self._storage: LedgerStorage | None = None
        self._journal: Journal | None = None
        self._server: BookieServer | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._checkpoint_wanted = asyncio.Event()
        self._registered = False
        self._replayed_records = 0
        self._torn_tails = 0
        self._gc_runs = 0
        self.disk = DiskWriter()
        self.availability = Availability(DiskState(config.disk_thresholds()))
        #: Set when the bookie may have turned read-only or writable: the lease loop
        #: publishes the state at once rather than at its next renewal.
        self._read_only_changed = asyncio.Event()
        self._published_read_only = False

    @property
    def address(self) -> str:
        invariant(bool(self._address), "bookie address asked before start")
        return self._address

    @property
    def storage(self) -> LedgerStorage:
        return present(self._storage, "bookie not started")

    # -- lifecycle --

    async def start(self) -> None:
        config = self.config
        data_dir = config.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        self._lock_data_dir()
        try:
            await self._start()
        except BaseException:
            await self._close_quietly()
            raise

    async def _start(self) -> None:
        config = self.config
        storage = self._storage = LedgerStorage(config.data_dir, fsync=config.fsync, disk=self.disk)
        self.availability.disk.observe(await asyncio.to_thread(measure, config.data_dir))
        mark = storage.open()
        journal_dir = config.data_dir / "journal"
        journal_dir.mkdir(exist_ok=True)
        report = await asyncio.to_thread(journal_module.replay, journal_dir, mark, storage.apply)
        self._replayed_records = report.records
        self._torn_tails = len(report.torn_tails)
        log.info(
            "journal replay from %s: %d records from %d files, %d torn tails",
            mark,
            report.records,
            report.files_read,
            self._torn_tails,
        )
        journal = self._journal = Journal(
            journal_dir,
            fsync=config.fsync,
            group_wait_ms=config.journal_group_wait_ms,
            group_bytes_max=config.journal_group_bytes_max,
            disk=self.disk,
        )
        journal.open()
        # Checkpoint the replayed state so the mark moves to the fresh file. On a full
        # disk this fails; the bookie then starts read-only and retries (the mark stays).
        await self._checkpoint_noting_failure()
        journal.start()
        server = self._server = BookieServer(
            storage,
            journal,
            availability=self.availability,
            stats=self.stats,
            fault_injection=config.fault_injection,
            on_checkpoint_wanted=self._checkpoint_wanted.set,
        )
        host, port = await server.start(config.host, config.port)
        self._address = f"{host}:{port}"
        self._started_at = time.monotonic()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._checkpoint_loop(), name="checkpoints"))
        self._tasks.append(loop.create_task(self._disk_loop(), name="disk-monitor"))
        if self._bookies is None and config.metadata_url:
            from georep.storage.meta.store import MetadataStore

            store = self._own_store = await MetadataStore.open(config.metadata_url)
            self._bookies, self._ledgers = store.bookies, store.ledgers
        if self._bookies is not None:
            await self._bookies.register_bookie(self._address, config.lease_s)
            self._registered = True
            # A bookie killed while read-only left its read-only lease behind, under this
            # address: placement would skip the restarted bookie until it ran out. What
            # this life says replaces it at once.
            self._published_read_only = True
            await self._publish_read_only(self._bookies, config.lease_s)
            self._tasks.append(loop.create_task(self._lease_loop(), name="bookie-lease"))
            self._tasks.append(loop.create_task(self._gc_loop(), name="bookie-gc"))
        log.info(
            "bookie %s serving %s (fsync %s, fault injection %s)",
            self._address,
            config.data_dir,
            "on" if config.fsync else "OFF",
            "on" if config.fault_injection else "off",
        )

    async def stop(self) -> None:
        server, journal = self._server, self._journal
        if server is not None:
            server.stop_listening()
            for connection in list(server.connections):
                connection.pause(PRESSURE)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if journal is not None:
            await journal.close()
        if server is not None:
            await server.close()
        if self._storage is not None and journal is not None and journal.failed is None:
            try:
                await self._checkpoint()
            except OSError as exc:
                log.warning("final checkpoint failed (the journal keeps the data): %s", exc)
        await self._close_quietly()
        log.info("bookie %s stopped", self._address)

    async def _close_quietly(self) -> None:
        if self._storage is not None:
            self._storage.close()
            self._storage = None
        if self._bookies is not None:
            if self._published_read_only:
                with contextlib.suppress(Exception):
                    await self._bookies.clear_bookie_read_only(self._address)
                self._published_read_only = False
            if self._registered:
                try:
                    await self._bookies.unregister_bookie(self._address)
                except Exception:
                    log.warning("could not unregister bookie %s", self._address, exc_info=True)
                self._registered = False
            if self._own_store is not None:
                await self._own_store.close()
                self._own_store = self._bookies = self._ledgers = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _lock_data_dir(self) -> None:
        fd = os.open(self.config.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirectoryInUse(
                f"{self.config.data_dir} is in use by another bookie"
            ) from None
        self._lock_fd = fd

    # -- checkpoints --

    async def checkpoint(self) -> None:
        """Checkpoint now (tests, operators); normally the background loop does it."""
        try:
            await self._checkpoint()
        except OSError as exc:
            self._note_checkpoint_failure(exc)
            raise
        if self.availability.checkpoint_failure is not None:
            log.warning("checkpoint went through again; bookie %s takes writes", self._address)
            self.availability.checkpoint_failure = None
        if self._server is not None:
            self._server.check_pressure()

    async def _checkpoint_noting_failure(self) -> None:
        try:
            await self._checkpoint()
        except OSError as exc:
            self._note_checkpoint_failure(exc)
        else:
            self.availability.checkpoint_failure = None

    def _note_checkpoint_failure(self, exc: OSError) -> None:
        if self.availability.checkpoint_failure is None:
            log.error("checkpoint failed; refusing adds until one goes through: %s", exc)
        self.availability.checkpoint_failure = str(exc)

    async def _checkpoint(self) -> None:
        journal = present(self._journal, "bookie not started")
        storage = present(self._storage, "bookie not started")
        mark = await storage.checkpoint(lambda: journal.synced_position)
        await asyncio.to_thread(journal.remove_files_before, mark.file_id)

    async def _checkpoint_loop(self) -> None:
        interval = self.config.checkpoint_interval_s
        while True:
            with contextlib.suppress(TimeoutError):
                await within(self._checkpoint_wanted.wait(), interval)
            self._checkpoint_wanted.clear()
            try:
                await self.checkpoint()
            except OSError:
                await asyncio.sleep(min(interval, self.config.disk_check_interval_s))
            except Exception:
                log.exception("checkpoint failed; will retry")
                await asyncio.sleep(min(interval, 1.0))

    # -- the disk --

    async def _disk_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.disk_check_interval_s)
            try:
                await self.check_disk()
            except OSError as exc:
                log.warning("disk check failed: %s", exc)

    async def check_disk(self) -> None:
        """Measure the disk, move between writable and read-only, and recover a failed
        journal or checkpoint once the disk is below its read-only threshold."""
        state = self.availability.disk
        warned = state.warn
        if state.observe(await asyncio.to_thread(measure, self.config.data_dir)):
            if state.read_only:
                log.warning("bookie %s read-only: %s", self._address, state.reason())
            else:
                log.warning("bookie %s writable again: disk usage below the mark", self._address)
        elif state.warn and not warned and state.usage is not None:
            log.warning(
                "bookie %s disk usage %.1f%% is above the warning threshold",
                self._address,
                state.usage.used_fraction * 100,
            )
        if (self.read_only_reason() is not None) != self._published_read_only:
            self._read_only_changed.set()
        if state.read_only:
            return
        journal = self._journal
        if journal is not None and journal.failed is not None:
            await journal.recover()
        if self.availability.checkpoint_failure is not None:
            self._checkpoint_wanted.set()

    def _journal_failure(self) -> str | None:
        journal = self._journal
        failed = journal.failed if journal is not None else None
        return str(failed) if failed is not None else None

    def read_only_reason(self) -> str | None:
        """Why this bookie refuses normal adds now, or None when it takes them."""
        return self.availability.reason(self._journal_failure())

    def availability_report(self) -> BookieAvailability:
        journal_failure = self._journal_failure()
        reason = self.availability.reason(journal_failure)
        usage = self.availability.disk.usage
        return BookieAvailability(
            self._address,
            reason is not None,
            reason,
            self.availability.reason_kind(journal_failure),
            round(usage.used_fraction, 4) if usage is not None else None,
        )

    # -- metadata duties --

    async def _lease_loop(self) -> None:
        bookies = present(self._bookies, "lease loop without a store")
        lease_s = self.config.lease_s
        while True:
            with contextlib.suppress(TimeoutError):
                await within(self._read_only_changed.wait(), lease_s / 3)
            self._read_only_changed.clear()
            try:
                await bookies.renew_bookie(self._address, lease_s)
            except Exception:
                log.warning("bookie lease renewal failed; re-registering", exc_info=True)
                with contextlib.suppress(Exception):
                    await bookies.register_bookie(self._address, lease_s)
            await self._publish_read_only(bookies, lease_s)

    async def _publish_read_only(self, bookies: BookieRepository, lease_s: float) -> None:
        """Hold the read-only lease while adds are refused (placement skips this bookie),
        and give it up once they are taken again (``meta/bookies.py``)."""
        try:
            if self.read_only_reason() is not None:
                await bookies.mark_bookie_read_only(self._address, lease_s)
                self._published_read_only = True
            elif self._published_read_only:
                await bookies.clear_bookie_read_only(self._address)
                self._published_read_only = False
        except Exception:
            log.warning("could not publish the read-only state", exc_info=True)

    async def _gc_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.gc_interval_s)
            try:
                await self.collect_garbage()
            except Exception:
                log.exception("garbage collection failed; will retry")

    async def collect_garbage(self) -> list[int]:
        """One GC pass (see the module docstring for the rule); returns collected ids."""
        ledgers = present(self._ledgers, "garbage collection needs a metadata store")
        listed = set(await ledgers.list_ledger_ids())
        highest = max(listed, default=-1)
        held = self.storage.ledger_ids()
        doomed = {ledger for ledger in held if ledger not in listed and ledger < highest}
        if doomed:
            # Checkpoint first so no journal record after the mark brings them back.
            await self._checkpoint()
        await self.storage.collect(doomed)
        self._gc_runs += 1
        if doomed:
            log.info("garbage collection: removed %d deleted ledgers", len(doomed))
        return sorted(doomed)

    # -- observability --

    def stats(self) -> dict[str, Any]:
        journal, storage, server = self._journal, self._storage, self._server
        stats: dict[str, Any] = {
            "address": self._address,
            "data_dir": str(self.config.data_dir),
            "fsync": self.config.fsync,
            "uptime_s": round(time.monotonic() - self._started_at, 3) if self._started_at else 0.0,
            "replayed_records": self._replayed_records,
            "journal_torn_tails": self._torn_tails,
            "gc_runs": self._gc_runs,
            "registered": self._registered,
            "read_only": self.read_only_reason() is not None,
            "read_only_reason": self.read_only_reason(),
        }
        disk = self.availability.disk
        if disk.usage is not None:
            stats["disk"] = {
                "used_fraction": round(disk.usage.used_fraction, 4),
                "free_bytes": disk.usage.free_bytes,
                "size_bytes": disk.usage.size_bytes,
                "warn": disk.warn,
                "over_threshold": disk.read_only,
                "warn_fraction": disk.thresholds.warn_fraction,
                "read_only_fraction": disk.thresholds.read_only_fraction,
                "writable_fraction": disk.thresholds.writable_fraction,
            }
        if journal is not None:
            stats["journal"] = {
                **_fields_of(journal.stats),
                "queued": journal.queued_count,
                "failed": str(journal.failed) if journal.failed else None,
            }
        if storage is not None:
            stats["storage"] = {
                **_fields_of(storage.stats),
                "ledgers": len(storage.ledger_ids()),
                "write_cache_bytes": storage.cache.bytes,
                "write_cache_entries": len(storage.cache),
            }
        if server is not None:
            stats["server"] = server.snapshot()
        return stats


def _fields_of(stats: DataclassInstance) -> dict[str, Any]:
    """A stats dataclass's fields by name, in declaration order."""
    return {field.name: getattr(stats, field.name) for field in dataclasses.fields(stats)}
