"""A replicator's settings: its buffers, its rate limits, its retry delays and how often
it samples its stats. The defaults are ``georep/limits.py``'s; the gateway narrows the
send window per remote (``[remotes]`` ``replication_window_*``, docs/WAN.md)."""

from __future__ import annotations

from dataclasses import dataclass

from georep import limits


@dataclass(frozen=True)
class ReplicatorSettings:
    receiver_queue_messages: int = limits.replicator_receive_messages_max
    buffered_entries_max: int = limits.replicator_buffered_entries_max
    buffered_bytes_max: int = limits.replicator_buffered_bytes_max
    pending_sends_count_max: int = limits.replicator_pending_sends_count_max
    pending_sends_bytes_max: int = limits.replicator_pending_sends_bytes_max
    #: None: unlimited.
    messages_per_s: float | None = None
    bytes_per_s: float | None = None
    backoff_s_initial: float = limits.replicator_retry_backoff_s_initial
    backoff_s_max: float = limits.replicator_retry_backoff_s_max
    stats_interval_s: float = limits.replicator_stats_interval_s_default
