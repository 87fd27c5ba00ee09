"""Which subscriptions a synced topic syncs: the pattern rule, the choice's reasons, and
the precedence of stored policies over the configuration (gateway/sync_choice.py)."""

from __future__ import annotations

import re

import pytest

from georep.domain.names import InvalidName, check_subscription_pattern
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.gateway.meta.subscription_sync_policies import SubscriptionSyncPolicyRecord
from georep.gateway.sync_choice import SyncChoices
from georep.runtime.console import ConfigError
from georep.subsync.core import SubscriptionState, SyncCore
from georep.subsync.settings import NamespaceSync, Selection, SyncMode, SyncSettings, parse_sync


@pytest.mark.parametrize(
    ("pattern", "name", "matched"),
    [
        ("orders-.*", "orders-eu", True),
        ("orders-.*", "old-orders-eu", False),  # the whole name, not a search
        ("orders", "orders-eu", False),
        ("orders-(eu|us)", "orders-us", True),
        ("commandes-été", "commandes-été", True),
    ],
)
def test_a_pattern_matches_whole_names(pattern, name, matched):
    assert (check_subscription_pattern(pattern).fullmatch(name) is not None) is matched


@pytest.mark.parametrize("pattern", ["", "(", "[a-", "x" * 257, "a\tb", None])
def test_bad_patterns_are_refused(pattern):
    with pytest.raises(InvalidName):
        check_subscription_pattern(pattern)


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        # name -> flagged?: orders-eu no, audit yes, other no
        (NamespaceSync(), {"audit": "flag"}),
        (NamespaceSync(subscriptions=Selection.ALL),
         {"audit": "flag+policy", "orders-eu": "policy", "other": "policy"}),
        (NamespaceSync(pattern=re.compile("orders-.*")),
         {"audit": "flag", "orders-eu": "policy"}),
        (NamespaceSync(pattern=re.compile("audit|orders-eu")),
         {"audit": "flag+policy", "orders-eu": "policy"}),
    ],
)  # fmt: skip
def test_the_core_syncs_the_chosen_and_says_why(choice, expected):
    core = SyncCore("A", namespace_sync=choice, settings=SyncSettings(), remotes=frozenset("B"))
    states = {
        name: SubscriptionState(mark_delete=Position(1, 0), consumers=1, replicated=flagged)
        for name, flagged in [("orders-eu", False), ("audit", True), ("other", False)]
    }
    assert set(core.selected(states)) == set(expected)
    assert core.synced_by == expected
    core.on_state(states, 0.0)
    subscriptions = core.stats()["subscriptions"]
    assert {name: entry["syncedBy"] for name, entry in subscriptions.items()} == expected


def test_a_new_choice_asks_for_the_states_again_only_when_it_differs():
    core = SyncCore("A", namespace_sync=NamespaceSync(), settings=SyncSettings())
    assert not core.choose(NamespaceSync(chosen_by="namespace policy"))
    assert core.choose(NamespaceSync(pattern=re.compile("o.*")))
    assert not core.choose(NamespaceSync(pattern=re.compile("o.*")))
    assert core.stats()["subscriptionChoice"] == {
        "subscriptions": "flagged",
        "pattern": "o.*",
        "chosenBy": "configuration",
    }


def policy(scope, name, subscriptions, pattern=None):
    return SubscriptionSyncPolicyRecord(scope, name, subscriptions, pattern, 0.0, 1)


def test_a_topic_policy_wins_over_its_namespace_policy_over_the_configuration():
    settings = parse_sync(
        {"namespaces": {"t/ns": {"mode": "pulsar-compatible", "subscriptions": "all"}}}
    )
    choices = SyncChoices(
        settings,
        [
            policy("namespace", "t/ns", "flagged", "orders-.*"),
            policy("topic", "persistent://t/ns/audit", "flagged"),
            policy("topic", "persistent://t/ns/x-partition-1", "all"),
            policy("namespace", "t/other", "all"),
        ],
    )
    assert choices.namespaces() == {"t/ns", "t/other"}

    def of(topic):
        chosen = choices.for_topic(TopicName.parse(topic))
        pattern = None if chosen.pattern is None else chosen.pattern.pattern
        return chosen.mode, chosen.subscriptions, pattern, chosen.chosen_by

    flagged, every = Selection.FLAGGED, Selection.ALL
    compat = SyncMode.PULSAR_COMPATIBLE  # the mode is always the configuration's
    assert of("t/ns/orders") == (compat, flagged, "orders-.*", "namespace policy")
    assert of("t/ns/audit-partition-0") == (compat, flagged, None, "topic policy")
    assert of("t/ns/x-partition-1") == (compat, every, None, "topic policy")
    assert of("t/ns/x-partition-0") == (compat, flagged, "orders-.*", "namespace policy")
    assert of("t/other/y") == (SyncMode.FULL, every, None, "namespace policy")
    assert of("t/none/z") == (SyncMode.FULL, flagged, None, "configuration")
    # Topics of one namespace share one choice: nothing built per partition.
    a, b = (choices.for_topic(TopicName.parse(f"t/ns/o-partition-{i}")) for i in (0, 1))
    assert a is b


def test_the_configuration_takes_a_pattern_and_refuses_it_beside_all():
    settings = parse_sync(
        {
            "subscription_pattern": "orders-.*",
            "namespaces": {"t/a": {"subscriptions": "flagged"}, "t/b": {"mode": "full"}},
        }
    )
    assert settings.default.pattern == re.compile("orders-.*")
    assert settings.for_namespace("t/a").pattern is None  # subscriptions sets the whole choice
    assert settings.for_namespace("t/b").pattern == re.compile("orders-.*")
    with pytest.raises(ConfigError, match="beside subscriptions"):
        parse_sync({"subscriptions": "all", "subscription_pattern": "o.*"})
    with pytest.raises(ConfigError, match=r'namespaces."t/a"\] subscription_pattern: .*regular'):
        parse_sync({"namespaces": {"t/a": {"subscription_pattern": "("}}})


def test_beside_pulsar_unflagged_subscriptions_are_chosen_by_the_pattern_too():
    from georep.subsync.pulsar_port import pulsar_states

    cursor = {"markDeletePosition": "3:4", "individuallyDeletedMessages": "[]"}
    internal = {"cursors": {"orders-eu": cursor, "audit": cursor}}
    stats = {
        "subscriptions": {
            "orders-eu": {"isReplicated": False, "consumers": [{"consumerName": "app"}]},
            "audit": {"isReplicated": False, "consumers": [{"consumerName": "app"}]},
        }
    }
    core = SyncCore(
        "A",
        namespace_sync=NamespaceSync(pattern=re.compile("orders-.*")),
        settings=SyncSettings(),
        in_band=False,
    )
    assert list(core.selected(pulsar_states(internal, stats))) == ["orders-eu"]
    assert core.synced_by == {"orders-eu": "policy"}


def test_georep_up_passes_a_pattern_through_to_its_gateways(tmp_path):
    import dataclasses
    import tomllib
    from pathlib import Path

    from georep.gateway.config import parse
    from georep.up.supervisor import _gateway_toml, load_config

    example = Path(__file__).parents[2] / "examples" / "three-clusters.toml"
    config = load_config(example, tmp_path)  # its ports are set: nothing binds them here
    table = {"namespaces": {"public/default": {"subscription_pattern": r"orders-\d+"}}}
    spec = dataclasses.replace(config.gateways["C"], subscription_sync=table)
    settings = parse(tomllib.loads(_gateway_toml(config, spec, tmp_path))).sync
    assert settings.for_namespace("public/default").pattern == re.compile(r"orders-\d+")
