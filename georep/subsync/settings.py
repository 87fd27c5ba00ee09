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

    [subscription_sync.namespaces."shop/eu"]
    subscription_pattern = "orders-.*"   # beside the flagged: names matching this, whole

**Modes.** ``pulsar-compatible`` syncs the mark-delete position (MDP) only, through
snapshots, as Pulsar does: it needs replication both ways. ``full`` adds the
acknowledged ranges above the MDP and batch indexes, mapped through the origin
positions replicated copies carry, and works for one-way replication too. ``off``
syncs nothing from this cluster (markers arriving from others are still applied).

**Which subscriptions.** ``flagged``: those opted in as in Pulsar, by a consumer that
subscribed with ``replicate_subscription_state_enabled=True`` (pulsar-client), or by
the subscription property ``georep.replicated=true``; the broker keeps the flag on the
cursor. ``all``: every subscription of the namespace's topics. ``subscription_pattern``
(with ``flagged``, the default): the flagged ones and those whose whole name matches the
regular expression (``names.check_subscription_pattern``). A table that sets
``subscriptions`` sets the whole choice (a namespace's ``subscriptions = "flagged"``
drops the top table's pattern); ``all`` beside a pattern is refused as ambiguous.

**Which wins.** A subscription-sync policy stored in the gateway's metadata store (its
REST, ``gateway/meta/subscription_sync_policies.py``) chooses the subscriptions of its
topic or namespace over this table: a topic's policy, else its namespace's, else the
namespace's table here, else the top table. The mode always comes from here.

**Where.** A gateway syncs the topics of every namespace it replicates (its policies)
and of every namespace named under ``namespaces`` here; the latter is how a cluster
that only *receives* replication (C in A→C) applies the state A sends.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from georep import limits
from georep.domain.names import InvalidName, check_subscription_pattern
from georep.domain.topic_name import InvalidTopicName, check_namespace
from georep.runtime.console import ConfigError, check_keys


class SyncMode(enum.Enum):
    FULL = "full"
    PULSAR_COMPATIBLE = "pulsar-compatible"
    OFF = "off"


class Selection(enum.Enum):
    FLAGGED = "flagged"
    ALL = "all"


#: Why a subscription is synced (``NamespaceSync.synced_by``), as ``/stats`` says it.
SYNCED_BY_FLAG = "flag"
SYNCED_BY_POLICY = "policy"
SYNCED_BY_BOTH = "flag+policy"


@dataclass(frozen=True)
class NamespaceSync:
    """How a topic's subscriptions are synced: the mode, and which subscriptions.

    >>> choice = NamespaceSync(pattern=re.compile("orders-.*"))
    >>> [choice.synced_by(n, f) for n, f in [("orders-eu", False), ("orders-eu", True),
    ...                                      ("audit", True), ("audit", False)]]
    ['policy', 'flag+policy', 'flag', None]
    """

    mode: SyncMode = SyncMode.FULL
    subscriptions: Selection = Selection.FLAGGED
    #: Beside the flagged subscriptions, those whose whole name matches (FLAGGED only).
    pattern: re.Pattern[str] | None = None
    #: Where the choice of subscriptions comes from, for ``/stats``: ``configuration``,
    #: ``namespace policy`` or ``topic policy``.
    chosen_by: str = "configuration"

    def synced_by(self, name: str, flagged: bool) -> str | None:
        """Why subscription ``name`` (its flag ``flagged``) is synced, or None if it is
        not: ``flag``, ``policy`` (``all`` or the pattern) or ``flag+policy``."""
        by_policy = self.subscriptions is Selection.ALL or (
            self.pattern is not None and self.pattern.fullmatch(name) is not None
        )
        if by_policy:
            return SYNCED_BY_BOTH if flagged else SYNCED_BY_POLICY
        return SYNCED_BY_FLAG if flagged else None

    def choosing(
        self, subscriptions: Selection, pattern: re.Pattern[str] | None, chosen_by: str
    ) -> NamespaceSync:
        """This mode with another choice of subscriptions (a stored policy's)."""
        return replace(self, subscriptions=subscriptions, pattern=pattern, chosen_by=chosen_by)

    def choice_json(self) -> dict[str, Any]:
        return {
            "subscriptions": self.subscriptions.value,
            "pattern": None if self.pattern is None else self.pattern.pattern,
            "chosenBy": self.chosen_by,
        }


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
    "subscription_pattern",
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
        check_keys(overrides, {"mode", "subscriptions", "subscription_pattern"}, inner)
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
            out,
            subscriptions=_enum(Selection, table["subscriptions"], f"{where} subscriptions"),
            pattern=None,
        )
    if "subscription_pattern" in table:
        if out.subscriptions is Selection.ALL:
            raise ConfigError(
                f'{where} subscription_pattern beside subscriptions = "all": all takes every'
                ' subscription; use "flagged" (the flag or the pattern) or drop the pattern'
            )
        try:
            pattern = check_subscription_pattern(table["subscription_pattern"])
        except InvalidName as error:
            raise ConfigError(f"{where} subscription_pattern: {error}") from None
        out = replace(out, pattern=pattern)
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
