"""The [subscription_sync] table: defaults, overrides, and errors that name the key."""

import pytest

from georep import limits
from georep.runtime.console import ConfigError
from georep.subsync.settings import Selection, SyncMode, parse_sync


def test_defaults_are_full_mode_for_flagged_subscriptions():
    settings = parse_sync({})
    assert settings.default.mode is SyncMode.FULL
    assert settings.default.subscriptions is Selection.FLAGGED
    assert settings.for_namespace("public/default") == settings.default


def test_the_scan_beside_pulsar_is_set_in_the_table():
    assert parse_sync({}).pulsar_scan_interval_s == limits.sync_pulsar_scan_interval_s
    assert parse_sync({"pulsar_scan_interval_s": 0.5}).pulsar_scan_interval_s == 0.5
    assert parse_sync({}).pulsar_hot_topics_max == limits.sync_pulsar_hot_topics_max
    hot_off = parse_sync({"pulsar_hot_topics_max": 0, "pulsar_hot_requests_per_s": 5})
    assert (hot_off.pulsar_hot_topics_max, hot_off.pulsar_hot_requests_per_s) == (0, 5.0)


def test_a_namespace_overrides_only_what_it_names():
    settings = parse_sync(
        {"subscriptions": "all", "namespaces": {"t/n": {"mode": "pulsar-compatible"}}}
    )
    chosen = settings.for_namespace("t/n")
    assert chosen.mode is SyncMode.PULSAR_COMPATIBLE
    assert chosen.subscriptions is Selection.ALL
    assert settings.for_namespace("t/other").mode is SyncMode.FULL


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"mode": "fast"}, "mode is 'fast'"),
        ({"subscriptions": "some"}, "subscriptions is 'some'"),
        ({"mod": "full"}, "unknown key(s) mod"),
        ({"poll_interval_s": 0}, "poll_interval_s must be in"),
        ({"pulsar_scan_interval_s": 0}, "pulsar_scan_interval_s must be in"),
        ({"pulsar_hot_topics_max": -1}, "pulsar_hot_topics_max must be in"),
        ({"pulsar_hot_topics_max": 1.5}, "pulsar_hot_topics_max must be an integer"),
        ({"pulsar_hot_requests_per_s": 0}, "pulsar_hot_requests_per_s must be a number"),
        ({"pulsar_hot_requests_per_s": True}, "pulsar_hot_requests_per_s must be a number"),
        ({"snapshot_interval_s": "1"}, "snapshot_interval_s must be a number"),
        ({"snapshot_interval_s": 5, "snapshot_timeout_s": 2}, "must exceed"),
        ({"snapshot_cache_size": 1}, "snapshot_cache_size must be in"),
        ({"namespaces": {"no-slash": {}}}, "no-slash"),
        ({"namespaces": {"t/n": {"interval": 1}}}, "unknown key(s) interval"),
    ],
)
def test_bad_tables_are_refused_with_the_key_named(table, message):
    with pytest.raises(ConfigError) as caught:
        parse_sync(table)
    assert message in str(caught.value)


def test_georep_up_writes_a_gateways_table_into_its_toml(tmp_path):
    import tomllib
    from pathlib import Path

    from georep.gateway.config import parse
    from georep.up.supervisor import _gateway_toml, load_config

    example = Path(__file__).parents[2] / "examples" / "three-clusters.toml"
    config = load_config(example, tmp_path)  # its ports are set: nothing binds them here
    written = _gateway_toml(config, config.gateways["C"], tmp_path)
    settings = parse(tomllib.loads(written)).sync
    assert "public/default" in settings.namespaces  # C applies what A sends
