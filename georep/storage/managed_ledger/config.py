"""Settings of one managed ledger, checked when built.

Rollover: the current ledger is closed and a new one started when it holds
``rollover_entries_max`` entries or ``rollover_bytes_max`` payload bytes, or is older than
``rollover_age_s_max`` (checked on append and by ``trim``) and holds at least one entry.

Retention keeps *acknowledged* data (entries below every cursor's mark-delete position)
for a while; unacknowledged data is never trimmed. Each bound that is set caps what is
kept, as Pulsar's retention time and size do:

- both None (the default): acknowledged ledgers are trimmed at once;
- ``retention_s`` only: a ledger is kept until ``retention_s`` after it was closed;
- ``retention_bytes`` only: the newest ledgers are kept while they sum to at most
  ``retention_bytes``;
- both: a ledger is kept while both hold. ``math.inf`` means unbounded.

Example: retention_s=3600, retention_bytes=10 GiB, acknowledged ledgers closed 2 h, 30 min
and 10 min ago of 4 GiB each: the 2 h one goes (too old), the other two stay (8 GiB).

Cursor persistence (see ``cursor.py``): every acknowledgement is made durable before it
returns. ``cursor_persist_interval_ms`` > 0 makes each persist wait that long first, to
fold more acknowledgements into one write at the price of that much ack latency; 0 writes
as soon as the previous write finished (acks that arrive meanwhile still share the next
write).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeGuard

from georep import limits
from georep.storage.errors import InvalidArgument

MIB = limits.MIB


@dataclass(frozen=True)
class ManagedLedgerConfig:
    ensemble_size: int = 3
    write_quorum: int = 2
    ack_quorum: int = 2
    rollover_entries_max: int = 50_000
    rollover_bytes_max: int = 256 * MIB
    rollover_age_s_max: float = 4 * 3600.0
    retention_s: float | None = None
    #: Bytes; ``math.inf`` (a namespace's unlimited size retention) keeps every ledger.
    retention_bytes: float | None = None
    cursor_persist_interval_ms: float = 0.0
    #: Ranges written per persisted cursor state, at most the global limit.
    cursor_ranges_persisted_max: int = limits.cursor_ranges_persisted_max
    #: Partially acknowledged batch entries written per persisted cursor state, at most
    #: the global limit.
    cursor_batch_entries_persisted_max: int = limits.cursor_batch_entries_persisted_max
    #: A cursor's ledger rolls over after this many persisted states, or these bytes.
    cursor_rollover_entries_max: int = 10_000
    cursor_rollover_bytes_max: int = 64 * MIB

    def __post_init__(self) -> None:
        if not (
            limits.ensemble_size_max
            >= self.ensemble_size
            >= self.write_quorum
            >= self.ack_quorum
            >= 1
        ):
            raise InvalidArgument(
                f"need {limits.ensemble_size_max} >= E >= Qw >= Qa >= 1, got "
                f"{self.ensemble_size}/{self.write_quorum}/{self.ack_quorum}"
            )
        _positive("rollover_entries_max", self.rollover_entries_max)
        _positive("rollover_bytes_max", self.rollover_bytes_max)
        _positive("rollover_age_s_max", self.rollover_age_s_max)
        _positive("cursor_rollover_entries_max", self.cursor_rollover_entries_max)
        _positive("cursor_rollover_bytes_max", self.cursor_rollover_bytes_max)
        for name in ("retention_s", "retention_bytes"):
            value = getattr(self, name)
            if value is not None and not (_is_number(value) and value >= 0):
                raise InvalidArgument(f"{name} must be None or >= 0, got {value!r}")
        if not (
            _is_number(self.cursor_persist_interval_ms) and 0 <= self.cursor_persist_interval_ms
        ):
            raise InvalidArgument(
                f"cursor_persist_interval_ms must be >= 0, got {self.cursor_persist_interval_ms!r}"
            )
        if not 1 <= self.cursor_ranges_persisted_max <= limits.cursor_ranges_persisted_max:
            raise InvalidArgument(
                f"cursor_ranges_persisted_max must be 1..{limits.cursor_ranges_persisted_max}"
            )
        batches_max = limits.cursor_batch_entries_persisted_max
        if not 0 <= self.cursor_batch_entries_persisted_max <= batches_max:
            raise InvalidArgument(f"cursor_batch_entries_persisted_max must be 0..{batches_max}")

    @property
    def has_retention(self) -> bool:
        return self.retention_s is not None or self.retention_bytes is not None


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


def _positive(name: str, value: object) -> None:
    if not (_is_number(value) and value > 0):
        raise InvalidArgument(f"{name} must be > 0, got {value!r}")
