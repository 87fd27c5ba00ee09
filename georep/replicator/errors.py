"""Operating errors of replication (a broken invariant is a bug and stops the process:
``georep.invariant``)."""

from __future__ import annotations


class ReplicationStalled(Exception):
    """An entry cannot be replicated as it is (its id does not fit a sequence id, it is
    larger than the remote accepts): the replicator stops there and reports it. Trying
    again soon cannot help (``georep/runtime/retry.py`` waits the longest delay)."""

    @property
    def retriable(self) -> bool:
        return False
