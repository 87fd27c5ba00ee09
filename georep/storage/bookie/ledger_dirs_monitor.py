"""Whether a bookie takes writes: its disk usage against thresholds, and failed writes.

BookKeeper's LedgerDirsMonitor, for georep's one data directory. Every
``disk_check_interval_s`` the bookie measures the file system holding its data directory
(``statvfs``: used = 1 - available / size, as ``df`` counts it) and feeds the fraction to
:class:`DiskState`, a pure state machine with hysteresis:

    usage >= warn_fraction        warn once (logged; ``warn`` in the stats)
    usage >= read_only_fraction   read-only: adds are refused with a reason
    read-only and usage < writable_fraction
                                  writable again (no restart)

Worked example with the defaults (0.90, 0.95, 0.90): 0.93 warns and stays writable;
0.96 turns read-only; 0.92 stays read-only (above the writable mark, so a bookie near the
line does not flap); 0.89 is writable again.

A write that failed (the journal, a checkpoint) is the other reason: the disk said no
before the thresholds saw it coming (a tiny disk, a burst, an I/O error). The bookie is
then read-only *because of that failure* until, at a later check with usage below the
read-only threshold, the journal reopens a fresh file and a checkpoint goes through;
:meth:`Availability.reason` names the first reason that holds, for ``/health`` and the
metrics. Recovery adds (a recovering reader re-writing a ledger's tail) are still taken
while only the threshold holds: the margin the threshold leaves is there for them, as
BookKeeper lets high-priority writes through to a read-only bookie.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from georep import limits
from georep.storage.errors import StorageError


class DiskThresholdsInvalid(StorageError, ValueError):
    """Thresholds that are not 0 < writable <= read_only <= 1 and warn <= read_only."""


@dataclass(frozen=True, slots=True)
class DiskThresholds:
    warn_fraction: float = limits.disk_usage_warn_fraction_default
    read_only_fraction: float = limits.disk_usage_read_only_fraction_default
    writable_fraction: float = limits.disk_usage_writable_fraction_default

    def __post_init__(self) -> None:
        if not (0.0 < self.writable_fraction <= self.read_only_fraction <= 1.0):
            raise DiskThresholdsInvalid(
                f"disk thresholds need 0 < writable ({self.writable_fraction}) <= "
                f"read-only ({self.read_only_fraction}) <= 1"
            )
        if not (0.0 < self.warn_fraction <= self.read_only_fraction):
            raise DiskThresholdsInvalid(
                f"disk warn threshold {self.warn_fraction} must be in "
                f"(0, read-only {self.read_only_fraction}]"
            )


@dataclass(frozen=True, slots=True)
class DiskUsage:
    used_fraction: float
    free_bytes: int
    size_bytes: int


def measure(path: Path) -> DiskUsage:
    """Usage of the file system holding ``path``, as ``df`` reports it."""
    stat = os.statvfs(path)
    size = stat.f_blocks * stat.f_frsize
    free = stat.f_bavail * stat.f_frsize
    used = 1.0 - (stat.f_bavail / stat.f_blocks) if stat.f_blocks else 1.0
    return DiskUsage(used, free, size)


class DiskState:
    """The thresholds' state machine (no I/O): feed it usages, ask whether it is full."""

    def __init__(self, thresholds: DiskThresholds) -> None:
        self.thresholds = thresholds
        self.read_only = False
        self.warn = False
        self.usage: DiskUsage | None = None

    def observe(self, usage: DiskUsage) -> bool:
        """Take one measurement; True when ``read_only`` changed."""
        thresholds = self.thresholds
        self.usage = usage
        fraction = usage.used_fraction
        self.warn = fraction >= thresholds.warn_fraction
        before = self.read_only
        if fraction >= thresholds.read_only_fraction:
            self.read_only = True
        elif fraction < thresholds.writable_fraction:
            self.read_only = False
        return before != self.read_only

    def reason(self) -> str | None:
        if not self.read_only or self.usage is None:
            return None
        return (
            f"disk usage {self.usage.used_fraction:.1%} reached the read-only threshold "
            f"{self.thresholds.read_only_fraction:.0%} ({self.usage.free_bytes} bytes free); "
            f"writable again below {self.thresholds.writable_fraction:.0%}"
        )


@dataclass(frozen=True, slots=True)
class BookieAvailability:
    """What ``/health`` and the metrics say of one bookie."""

    address: str
    read_only: bool
    #: Why it refuses normal adds (None while it takes them).
    reason: str | None
    #: The reason as a bounded label: ``journal``, ``checkpoint`` or ``disk_usage``.
    reason_kind: str | None
    disk_used_fraction: float | None

    def to_json(self) -> dict[str, object]:
        return {
            "address": self.address,
            "read_only": self.read_only,
            "reason": self.reason,
            "reason_kind": self.reason_kind,
            "disk_used_fraction": self.disk_used_fraction,
        }


@dataclass(slots=True)
class Availability:
    """Why a bookie refuses writes, if it does: the disk state and the last failures."""

    disk: DiskState
    #: The last checkpoint's failure, as text, until a checkpoint goes through.
    checkpoint_failure: str | None = None

    def reason(self, journal_failure: str | None = None) -> str | None:
        """Why normal adds are refused now (the journal's failure first), or None."""
        if journal_failure is not None:
            return journal_failure
        if self.checkpoint_failure is not None:
            return f"checkpoint failed: {self.checkpoint_failure}"
        return self.disk.reason()

    def reason_kind(self, journal_failure: str | None = None) -> str | None:
        if journal_failure is not None:
            return "journal"
        if self.checkpoint_failure is not None:
            return "checkpoint"
        return "disk_usage" if self.disk.read_only else None

    @property
    def takes_recovery_adds(self) -> bool:
        """Recovery adds pass the threshold, not a failed checkpoint (nor journal)."""
        return self.checkpoint_failure is None
