"""Which ledgers of a managed ledger trimming may delete, pure (no I/O).

A prefix of whole ledgers goes: each fully below every cursor's mark-delete position
(with no cursor, vacuously true), not held by retention (``config.py``: kept while
younger than ``retention_s`` and while the log from it on is within
``retention_bytes``), and never the last ledger of the list. An empty ledger holds
nothing anyone needs and goes with the prefix.

Example: ledgers 7 (3 entries), 12 (0), 15 (2), slowest mark-delete (7, 2), no
retention: 7 and 12 go (count 2); 15 is the last ledger and stays.
"""

from __future__ import annotations

from collections.abc import Sequence

from georep.domain.position import Position
from georep.storage.managed_ledger.config import ManagedLedgerConfig
from georep.storage.managed_ledger.ledger_index import LedgerIndex
from georep.storage.meta.managed_ledgers import LedgerInfo


def trimmable_count(
    index: LedgerIndex,
    ledgers: Sequence[LedgerInfo],
    slowest: Position | None,
    config: ManagedLedgerConfig,
    now: float,
) -> int:
    """How many ledgers from the start of the list trimming may delete; ``slowest``:
    the lowest mark-delete position of the log's cursors (None: no cursor)."""
    remaining_bytes = index.total_bytes()
    count = 0
    for position in range(len(index.ids) - 1):  # never the last ledger
        entries = index.counts[position]
        if entries > 0:
            if slowest is not None and Position(index.ids[position], entries - 1) > slowest:
                break  # a cursor still needs it
            if retained(config, ledgers[position], remaining_bytes, now):
                break
        remaining_bytes -= index.sizes[position]
        count += 1
    return count


def retained(
    config: ManagedLedgerConfig, ledger: LedgerInfo, remaining_bytes: int, now: float
) -> bool:
    """Whether retention keeps this acknowledged ledger; ``remaining_bytes`` counts it
    and every newer ledger."""
    if not config.has_retention:
        return False
    closed_at = ledger.closed_at if ledger.closed_at is not None else ledger.created_at
    young = config.retention_s is None or now - closed_at < config.retention_s
    small = config.retention_bytes is None or remaining_bytes <= config.retention_bytes
    return young and small
