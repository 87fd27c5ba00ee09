"""A replicator's counters and the rates sampled from them (Pulsar's replication stats
names: ``msgRateIn``, ``msgThroughputIn``, ``msgRateOut``, ``msgThroughputOut``).

The counters only grow while the replicator lives; the rates are the counters' growth
between two samples, per second. Example: 1,000 messages and 1 MB read in, 900 messages
and 0.9 MB sent out between samples 2 s apart give 500 msg/s and 500 kB/s in, 450 msg/s
and 450 kB/s out. A sample no later than the one before leaves the rates as they were.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass
class Counters:
    messages_in: int = 0
    bytes_in: int = 0
    messages_out: int = 0
    bytes_out: int = 0
    entries_out: int = 0
    #: The remote said it had the entry already (deduplication).
    duplicates: int = 0
    #: Not sent: the remote's last sequence id was at or above the entry's.
    already_replicated: int = 0
    #: Not replicated by rule (not local, marker, not addressed), by verdict value.
    skipped: collections.Counter[str] = field(default_factory=collections.Counter[str])
    errors: int = 0


class Rates:
    """The rates of ``counters`` at the last :meth:`sample`."""

    def __init__(self, counters: Counters, clock: Callable[[], float] = time.monotonic) -> None:
        self._counters = counters
        self._clock = clock
        self._sample: tuple[float, int, int, int, int] | None = None
        self.current: Mapping[str, float] = {
            "msgRateIn": 0.0,
            "msgThroughputIn": 0.0,
            "msgRateOut": 0.0,
            "msgThroughputOut": 0.0,
        }

    def sample(self) -> None:
        now = self._clock()
        c = self._counters
        sample = (now, c.messages_in, c.bytes_in, c.messages_out, c.bytes_out)
        previous, self._sample = self._sample, sample
        if previous is None or now <= previous[0]:
            return
        elapsed = now - previous[0]
        self.current = {
            "msgRateIn": (sample[1] - previous[1]) / elapsed,
            "msgThroughputIn": (sample[2] - previous[2]) / elapsed,
            "msgRateOut": (sample[3] - previous[3]) / elapsed,
            "msgThroughputOut": (sample[4] - previous[4]) / elapsed,
        }
