"""Managed ledgers (a topic partition's log over many ledgers) and cursors (a
subscription's acknowledgements), on the ledger client and the metadata store.

``factory.ManagedLedgerFactory`` opens logs; ``managed_ledger.ManagedLedger`` appends,
reads, rolls over and trims, taking ownership of its list of ledgers through
``opening``, its appends' room from ``append_room``, its reads' handles from
``ledger_reads``; ``cursor.ManagedCursor`` owns a subscription's acknowledgements and
persists them through ``cursor_ledger``. ``ledger_index``, ``retention``, ``range_set``
and ``ack_state`` are the pure arithmetic under them, ``cursor_state`` the persisted
format, ``config`` the settings.
"""

from georep.domain.position import Position
from georep.storage.managed_ledger.config import ManagedLedgerConfig
from georep.storage.managed_ledger.cursor import ManagedCursor
from georep.storage.managed_ledger.factory import ManagedLedgerFactory
from georep.storage.managed_ledger.managed_ledger import ManagedLedger
from georep.storage.managed_ledger.range_set import RangeSet

__all__ = [
    "ManagedCursor",
    "ManagedLedger",
    "ManagedLedgerConfig",
    "ManagedLedgerFactory",
    "Position",
    "RangeSet",
]
