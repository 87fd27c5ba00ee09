"""The drill's operating errors.

- :class:`DrillUsageError`: the flags ask for something the drill cannot do (exit 2).
- :class:`DrillError`: the drill could not run: a process did not start, a cluster did
  not answer, consumers on A never reached the failure point (exit 1).

A drill that ran and saw duplicates or losses is not an error: that is its finding.
"""

from __future__ import annotations


class DrillUsageError(Exception):
    """Bad flags or a combination the drill refuses; the message says which."""


class DrillError(Exception):
    """The drill could not run to its report."""
