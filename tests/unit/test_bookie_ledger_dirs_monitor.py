"""The disk thresholds' state machine, table-driven, and the disk writer's injected faults."""

from __future__ import annotations

import errno
import os

import pytest

from georep.storage.bookie.disk_io import DiskFault, DiskWriter, cut_back
from georep.storage.bookie.ledger_dirs_monitor import (
    Availability,
    DiskState,
    DiskThresholds,
    DiskThresholdsInvalid,
    DiskUsage,
)


def _usage(fraction: float) -> DiskUsage:
    return DiskUsage(fraction, int((1 - fraction) * 1000), 1000)


# (usage fed, read-only after, warn after, changed) with warn 0.90, read-only 0.95,
# writable 0.90: the docstring's worked example, then the edges.
STEPS = [
    (0.50, False, False, False),
    (0.93, False, True, False),
    (0.95, True, True, True),
    (0.96, True, True, False),
    (0.92, True, True, False),
    (0.90, True, True, False),
    (0.89, False, False, True),
    (1.00, True, True, True),
    (0.10, False, False, True),
]


def test_thresholds_move_read_only_with_hysteresis():
    state = DiskState(DiskThresholds(0.90, 0.95, 0.90))
    for fraction, read_only, warn, changed in STEPS:
        assert state.observe(_usage(fraction)) is changed, fraction
        assert (state.read_only, state.warn) == (read_only, warn), fraction
        assert (state.reason() is not None) is read_only


@pytest.mark.parametrize(
    ("warn", "read_only", "writable"),
    [(0.9, 0.95, 0.96), (0.9, 1.01, 0.5), (0.9, 0.95, 0.0), (0.97, 0.95, 0.9)],
)
def test_thresholds_out_of_order_are_refused(warn, read_only, writable):
    with pytest.raises(DiskThresholdsInvalid):
        DiskThresholds(warn, read_only, writable)


def test_availability_names_the_first_reason_and_lets_recovery_adds_pass_a_threshold():
    availability = Availability(DiskState(DiskThresholds()))
    assert availability.reason() is None
    availability.disk.observe(_usage(0.99))
    reason = availability.reason()
    assert reason is not None and "read-only threshold" in reason
    assert availability.takes_recovery_adds
    availability.checkpoint_failure = "[Errno 28] No space left on device"
    reason = availability.reason()
    assert reason is not None and reason.startswith("checkpoint failed")
    assert not availability.takes_recovery_adds
    assert availability.reason("journal write failed") == "journal write failed"


@pytest.mark.parametrize(
    ("kind", "code", "written"),
    [("enospc", errno.ENOSPC, 0), ("eio", errno.EIO, 0), ("short", errno.ENOSPC, 50)],
)
def test_disk_writer_fails_the_way_a_disk_does(tmp_path, kind, code, written):
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        disk = DiskWriter(DiskFault(kind, "journal"))
        disk.write_all(fd, b"x" * 10, "entry_log")  # another site: untouched
        with pytest.raises(OSError) as caught:
            disk.write_all(fd, b"y" * 100, "journal")
        assert caught.value.errno == code
        assert os.fstat(fd).st_size == 10 + written
        assert cut_back(fd, 10)
        assert (tmp_path / "f").read_bytes() == b"x" * 10
    finally:
        os.close(fd)
