"""What a gateway syncs of its subscriptions, and how: the ``[subscription_sync]`` table.

::

    [subscription_sync]
    mode = "full"                  # full (default) | pulsar-compatible | off
    subscriptions = "flagged"      # flagged (default) | all
    snapshot_interval_s = 1.0
    snapshot_timeout_s = 30.0
    snapshot_cache_size = 10
    poll_interval_s = 0.2
    pulsar_scan_interval_s = 1.0   # beside real Pulsar: how often to look for changes
    pulsar_hot_topics_max = 64     # beside real Pulsar: topics that moved lately, looked
    pulsar_hot_requests_per_s = 50 #   at alone between those looks (0: none), and its pace

    [subscription_sync.namespaces."public/default"]   # per-namespace overrides
    mode = "pulsar-compatible"
    subscriptions = "all"

**Modes.** ``pulsar-compatible`` syncs the mark-delete position (MDP) only, through
snapshots, as Pulsar does: it needs replication both ways. ``full`` adds the
acknowledged ranges above the MDP and batch indexes, mapped through the origin
positions replicated copies carry, and works for one-way replication too. ``off``
syncs nothing from this cluster (markers arriving from others are still applied).

**Which subscriptions.** ``flagged``: those opted in as in Pulsar, by a consumer that
subscribed with ``replicate_subscription_state_enabled=True`` (pulsar-client), or by
the subscription property ``georep.replicated=true``; the broker keeps the flag on the
cursor. ``all``: every subscription of the namespace's topics.

**Where.** A gateway syncs the topics of every namespace it replicates (its policies)
and of every namespace named under ``namespaces`` here; the latter is how a cluster
that only *receives* replication (C in A→C) applies the state A sends.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from georep import limits
from georep.console import ConfigError, check_keys
from georep.topic_name import InvalidTopicName, check_namespace


class SyncMode(enum.Enum):
    FULL = "full"
    PULSAR_COMPATIBLE = "pulsar-compatible"
    OFF = "off"


class Selection(enum.Enum):
    FLAGGED = "flagged"
    ALL = "all"


@dataclass(frozen=True)
class NamespaceSync:
    mode: SyncMode = SyncMode.FULL
    subscriptions: Selection = Selection.FLAGGED


@dataclass(frozen=True)
class SyncSettings:
    default: NamespaceSync = NamespaceSync()
    namespaces: Mapping[str, NamespaceSync] = field(default_factory=dict)
    snapshot_interval_s: float = limits.snapshot_interval_s_default
    snapshot_timeout_s: float = limits.snapshot_timeout_s_default
    snapshot_cache_size: int = limits.snapshot_cache_count_default
    poll_interval_s: float = limits.sync_poll_interval_s_default
    #: Beside real Pulsar: seconds between reads of the broker's subscription figures
    #: (one request for every topic), which say which topics' subscriptions moved.
    pulsar_scan_interval_s: float = limits.sync_pulsar_scan_interval_s
    #: Beside real Pulsar: topics whose subscriptions moved lately, each looked at alone
    #: between those reads (``pulsar_port.MetricsScan``), and the pace of those requests.
    pulsar_hot_topics_max: int = limits.sync_pulsar_hot_topics_max
    pulsar_hot_requests_per_s: float = limits.sync_pulsar_hot_requests_per_s

    def for_namespace(self, namespace: str) -> NamespaceSync:
        return self.namespaces.get(namespace, self.default)


_KEYS = {
    "mode",
    "subscriptions",
    "snapshot_interval_s",
    "snapshot_timeout_s",
    "snapshot_cache_size",
    "poll_interval_s",
    "pulsar_scan_interval_s",
    "pulsar_hot_topics_max",
    "pulsar_hot_requests_per_s",
    "namespaces",
}


def parse_sync(table: Mapping[str, Any]) -> SyncSettings:
    """The checked ``[subscription_sync]`` table; ConfigError names the key at fault."""
    where = "[subscription_sync]"
    check_keys(table, _KEYS, where)
    default = _namespace_sync(table, NamespaceSync(), where)
    namespaces_table = table.get("namespaces", {})
    if not isinstance(namespaces_table, Mapping):
        raise ConfigError(f"{where} namespaces must be a table")
    if len(namespaces_table) > limits.sync_namespaces_count_max:
        raise ConfigError(f"{where} namespaces: at most {limits.sync_namespaces_count_max}")
    namespaces = {}
    for name, overrides in namespaces_table.items():
        inner = f'[subscription_sync.namespaces."{name}"]'
        try:
            check_namespace(name)
        except InvalidTopicName as error:
            raise ConfigError(f"{inner}: {error}") from None
        if not isinstance(overrides, Mapping):
            raise ConfigError(f"{inner} must be a table")
        check_keys(overrides, {"mode", "subscriptions"}, inner)
        namespaces[name] = _namespace_sync(overrides, default, inner)
    interval = _seconds(table, "snapshot_interval_s", limits.snapshot_interval_s_default)
    timeout = _seconds(table, "snapshot_timeout_s", limits.snapshot_timeout_s_default)
    if timeout <= interval:
        raise ConfigError(f"{where} snapshot_timeout_s must exceed snapshot_interval_s")
    cache = _integer(
        table, "snapshot_cache_size", limits.snapshot_cache_count_default,
        2, limits.snapshot_cache_count_max,
    )  # fmt: skip
    hot = _integer(
        table, "pulsar_hot_topics_max", limits.sync_pulsar_hot_topics_max,
        0, limits.sync_pulsar_hot_topics_ceiling,
    )  # fmt: skip
    pace = table.get("pulsar_hot_requests_per_s", limits.sync_pulsar_hot_requests_per_s)
    ceiling = limits.sync_pulsar_hot_requests_per_s_ceiling
    if isinstance(pace, bool) or not isinstance(pace, int | float) or not 1 <= pace <= ceiling:
        raise ConfigError(f"{where} pulsar_hot_requests_per_s must be a number in [1, {ceiling:g}]")
    return SyncSettings(
        default=default,
        namespaces=namespaces,
        snapshot_interval_s=interval,
        snapshot_timeout_s=timeout,
        snapshot_cache_size=cache,
        poll_interval_s=_seconds(table, "poll_interval_s", limits.sync_poll_interval_s_default),
        pulsar_scan_interval_s=_seconds(
            table, "pulsar_scan_interval_s", limits.sync_pulsar_scan_interval_s
        ),
        pulsar_hot_topics_max=hot,
        pulsar_hot_requests_per_s=float(pace),
    )


def _namespace_sync(table: Mapping[str, Any], base: NamespaceSync, where: str) -> NamespaceSync:
    out = base
    if "mode" in table:
        out = replace(out, mode=_enum(SyncMode, table["mode"], f"{where} mode"))
    if "subscriptions" in table:
        out = replace(
            out, subscriptions=_enum(Selection, table["subscriptions"], f"{where} subscriptions")
        )
    return out


_E = TypeVar("_E", bound=enum.Enum)


def _enum(kind: type[_E], value: Any, what: str) -> _E:
    try:
        return kind(value)
    except ValueError:
        allowed = " | ".join(member.value for member in kind)
        raise ConfigError(f"{what} is {value!r}; use {allowed}") from None


def _integer(table: Mapping[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"[subscription_sync] {key} must be an integer")
    if not low <= value <= high:
        raise ConfigError(f"[subscription_sync] {key} must be in {low}..{high}")
    return value


def _seconds(table: Mapping[str, Any], key: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"[subscription_sync] {key} must be a number of seconds")
    low, high = limits.sync_seconds_min, limits.sync_seconds_max
    if not low <= value <= high:
        raise ConfigError(f"[subscription_sync] {key} must be in [{low}, {high}] seconds")
    return float(value)
