"""Prometheus metrics of the admin REST, served at ``GET /metrics``.

Each app has its own ``CollectorRegistry`` (no process-global state, so two apps in one
process, as in tests, do not share counts). The broker may register its own collectors on
``AdminMetrics.registry`` to have them served at the same endpoint.

Series (labels bounded: ``route`` is the path template, e.g.
``/admin/v2/tenants/{tenant}``, or ``unmatched``):

- ``georep_admin_requests_total{method, route, status}``
- ``georep_admin_request_duration_seconds{method, route}`` (histogram)
- ``georep_admin_auth_refusals_total{status}`` (401 and 403)
- ``georep_metadata_store_operations_total``, ``..._cas_conflicts_total``,
  ``..._unavailable_total``: the admin's metadata store's own counts.
- ``georep_bookie_read_only{bookie, reason}`` (1 while the bookie refuses adds; reason
  ``journal``, ``checkpoint``, ``disk_usage`` or ``none``) and
  ``georep_bookie_disk_used_ratio{bookie}``: the cluster's in-process bookies.
- ``georep_managed_ledger_cache_bytes`` and ``..._entries`` (kept now), and
  ``..._hit_reads_total``, ``..._missed_reads_total``, ``..._evicted_entries_total``:
  the managed ledgers' entry cache (``storage/managed_ledger/entry_cache.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from georep.storage.bookie.ledger_dirs_monitor import BookieAvailability

CONTENT_TYPE = CONTENT_TYPE_LATEST


class AdminMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "georep_admin_requests",
            "Admin REST requests answered, by route template and status.",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.request_duration = Histogram(
            "georep_admin_request_duration_seconds",
            "Time to answer an admin REST request.",
            ("method", "route"),
            registry=self.registry,
        )
        self.auth_refusals = Counter(
            "georep_admin_auth_refusals",
            "Admin REST requests refused for want of a (sufficient) token.",
            ("status",),
            registry=self.registry,
        )
        self._store_stats = _StoreStatsCollector()
        self.registry.register(self._store_stats)
        self._bookies = _BookieCollector()
        self.registry.register(self._bookies)
        self._entry_cache = _EntryCacheCollector()
        self.registry.register(self._entry_cache)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.request_duration.labels(method, route).observe(seconds)
        if status in (401, 403):
            self.auth_refusals.labels(str(status)).inc()

    def watch_store(self, stats: Callable[[], Mapping[str, int]] | None) -> None:
        """Serve the counts ``stats()`` returns (``MetadataEngine.stats``); None stops."""
        self._store_stats.source = stats

    def watch_bookies(self, bookies: Callable[[], Sequence[BookieAvailability]] | None) -> None:
        """Serve each bookie's read-only state and disk usage; None stops."""
        self._bookies.source = bookies

    def watch_entry_cache(self, snapshot: Callable[[], Mapping[str, int]] | None) -> None:
        """Serve the entry cache's figures ``snapshot()`` returns; None stops."""
        self._entry_cache.source = snapshot

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _StoreStatsCollector(Collector):
    _SERIES = (
        ("operations", "Metadata store operations run."),
        ("cas_conflicts", "Metadata compare-and-sets lost to a concurrent writer."),
        ("unavailable", "Metadata operations failed because the database was unavailable."),
    )

    def __init__(self) -> None:
        self.source: Callable[[], Mapping[str, int]] | None = None

    def describe(self) -> Iterator[CounterMetricFamily]:
        for key, help_text in self._SERIES:
            yield CounterMetricFamily(f"georep_metadata_store_{key}", help_text)

    def collect(self) -> Iterator[CounterMetricFamily]:
        counts = self.source() if self.source is not None else {}
        for key, help_text in self._SERIES:
            family = CounterMetricFamily(f"georep_metadata_store_{key}", help_text)
            family.add_metric([], counts.get(key, 0))
            yield family


class _BookieCollector(Collector):
    def __init__(self) -> None:
        self.source: Callable[[], Sequence[BookieAvailability]] | None = None

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily("georep_bookie_read_only", "1 while a bookie refuses adds.")
        yield GaugeMetricFamily("georep_bookie_disk_used_ratio", "A bookie's disk usage.")

    def collect(self) -> Iterator[GaugeMetricFamily]:
        bookies = self.source() if self.source is not None else ()
        read_only = GaugeMetricFamily(
            "georep_bookie_read_only",
            "1 while a bookie refuses adds (full disk, failed journal or checkpoint).",
            labels=("bookie", "reason"),
        )
        used = GaugeMetricFamily(
            "georep_bookie_disk_used_ratio",
            "Used fraction of the file system holding a bookie's data directory.",
            labels=("bookie",),
        )
        for bookie in bookies:
            read_only.add_metric(
                [bookie.address, bookie.reason_kind or "none"], 1.0 if bookie.read_only else 0.0
            )
            if bookie.disk_used_fraction is not None:
                used.add_metric([bookie.address], bookie.disk_used_fraction)
        yield read_only
        yield used


class _EntryCacheCollector(Collector):
    _GAUGES = (
        ("bytes", "Bytes of entries the managed ledgers' entry cache keeps now."),
        ("entries", "Entries the managed ledgers' entry cache keeps now."),
    )
    _COUNTERS = (
        ("hit_reads", "Reads of a ledger's entries served whole from the entry cache."),
        ("missed_reads", "Reads of a ledger's entries that went to the bookies."),
        ("evicted_entries", "Entries the entry cache dropped to stay within its bounds."),
    )

    def __init__(self) -> None:
        self.source: Callable[[], Mapping[str, int]] | None = None

    def describe(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        return self.collect() if self.source is not None else iter(())

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        if self.source is None:
            return
        figures = self.source()
        for key, help_text in self._GAUGES:
            yield GaugeMetricFamily(
                f"georep_managed_ledger_cache_{key}", help_text, value=figures.get(key, 0)
            )
        for key, help_text in self._COUNTERS:
            yield CounterMetricFamily(
                f"georep_managed_ledger_cache_{key}", help_text, value=figures.get(key, 0)
            )
