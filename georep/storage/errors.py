"""Operating errors of the storage layer.

Each is something a caller can meet in a healthy system (a bookie down, a ledger fenced
by a recovering reader) and must handle. Broken invariants are not here: they raise
:class:`georep.invariant.InvariantViolation` and stop the process.
"""

from __future__ import annotations


class StorageError(Exception):
    """Base of every storage-layer operating error."""


class NotEnoughBookies(StorageError):
    """Fewer writable bookies than the ensemble needs."""


class BookieUnavailable(StorageError):
    """A bookie did not answer: connection refused or lost, or the deadline passed."""


class BookieError(StorageError):
    """A bookie answered with an error status."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LedgerFenced(StorageError):
    """The ledger was fenced by a recovering reader: this writer may write no more."""


class LedgerClosed(StorageError):
    """The ledger is closed (or being recovered): no more adds."""


class NoSuchLedger(StorageError):
    """The ledger does not exist (in the metadata store or on a bookie)."""


class NoSuchEntry(StorageError):
    """The entry does not exist on the bookie asked."""


class ReadBeyondLastAddConfirmed(StorageError):
    """A confirmed read asked for an entry past the ledger's LAC."""


class CorruptEntry(StorageError):
    """An entry failed its checksum or carried the wrong ids."""


class BadVersion(StorageError):
    """A compare-and-set on metadata lost against a concurrent update."""


class RecoveryFailed(StorageError):
    """Ledger recovery could not decide the ledger's end; it can be retried."""


class ProtocolError(StorageError):
    """A peer sent bytes that are not a valid frame; the connection is closed."""


class EntryTooLarge(StorageError):
    """An entry payload exceeds ``limits.entry_payload_bytes_max``."""


class InvalidArgument(StorageError):
    """A caller passed parameters outside their contract (E < Qw, negative ids, ...)."""


class JournalFailed(StorageError):
    """A bookie's journal could not write or sync; that bookie takes no more writes."""


class MetadataUnavailable(StorageError):
    """The metadata database could not be reached or stayed locked past its timeout."""


class ManagedLedgerError(StorageError):
    """Base of the operating errors of managed ledgers and cursors."""


class ManagedLedgerFenced(ManagedLedgerError):
    """Another owner opened the managed ledger (or its cursor) since this one did: this
    instance may write no more. Close it; the new owner has the log."""


class ManagedLedgerClosed(ManagedLedgerError):
    """The managed ledger (or cursor) was closed or deleted by this process."""


class NoSuchManagedLedger(ManagedLedgerError):
    """No managed ledger of that name exists in the metadata store."""


class NoSuchCursor(ManagedLedgerError):
    """No cursor of that name exists on the managed ledger."""
