"""Operating errors of the snapshot and marker subsystem."""

from __future__ import annotations


class MarkerError(ValueError):
    """A marker payload that cannot be used: malformed, oversized, or inconsistent.

    A marker is control data from another cluster; a bad one is dropped with this error
    (and counted), never applied and never allowed to crash the process.
    """
