"""What a ledger's handles and ops need of the client that made them.

A :class:`LedgerHandle`, a :class:`ReadHandle`, a :class:`ReadEntryOp` and a
:class:`LedgerRecoveryOp` talk to bookies, pick replacement bookies and compare-and-set
ledger metadata; nothing else. They are given those collaborators through this narrow
context (BookKeeper's ``ClientContext``) instead of the whole client, so that
``bookkeeper.py`` imports them and none of them imports it back: the client package reads
in one direction, ``bookkeeper`` -> ``ledger_recovery_op`` -> ``ledger_handle``,
``read_handle`` -> ``client_context``.

It is a Protocol, not an object of its own: :class:`BookKeeper` has exactly these
members and hands itself down, and a caller that holds a BookKeeper (the replication
worker reading with a ``ReadEntryOp``) passes it as it is. Every member is read-only: a
handle never swaps its client's collaborators.
"""

from __future__ import annotations

from typing import Protocol

from georep.storage.client.bookie_client import BookieClientPool
from georep.storage.client.placement import EnsemblePlacementPolicy
from georep.storage.meta.ledgers import LedgerRepository


class ClientContext(Protocol):
    @property
    def clients(self) -> BookieClientPool:
        """One connection per bookie, and the request ids an encoded add shares."""
        ...

    @property
    def placement(self) -> EnsemblePlacementPolicy:
        """Where a failed bookie's replacement comes from (ensemble change)."""
        ...

    @property
    def ledgers(self) -> LedgerRepository:
        """Ledger metadata: read, and compare-and-set on ensemble change, recovery and
        close."""
        ...

    @property
    def speculative_read_timeout_ms(self) -> float:
        """How long a read waits on one replica before asking the next one as well."""
        ...
