"""The gateway's TOML configuration: a good file, and each mistake named clearly."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from georep import limits
from georep.gateway.cluster_endpoint import ClusterKind
from georep.gateway.config import load, parse
from georep.runtime.console import ConfigError

GOOD = """
[gateway]
listen = "127.0.0.1:0"
metadata = "sqlite:///gw.db"
discovery_interval_s = 1.5

[local]
name = "A"
service_url = "pulsar://127.0.0.1:6650"
admin_url = "http://127.0.0.1:8080"

[remotes.B]
service_url = "pulsar://10.0.0.2:6650"
admin_url = "http://10.0.0.2:8080"
token_env = "B_TOKEN"

[rate_limits]
messages_per_s = 1000

[policies.namespaces]
"public/default" = ["B", "A"]
"""


def write(tmp_path, text: str):
    path = tmp_path / "gateway.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_good_file(tmp_path) -> None:
    config = load(write(tmp_path, GOOD), {"B_TOKEN": "b-token-0123456789abcdef"})
    assert config.local.name == "A" and config.listen_port == 0
    assert config.remotes["B"].token_text == "b-token-0123456789abcdef"
    assert "b-token" not in repr(config)  # tokens never print
    assert config.messages_per_s == 1000 and config.bytes_per_s is None
    assert config.seed_namespace_policies == {"public/default": ("B",)}
    assert config.discovery_interval_s == 1.5
    assert config.stuck_after_s == limits.replicator_stuck_after_s_default
    stuck = load(
        write(tmp_path, GOOD.replace("discovery_interval_s = 1.5", "stuck_after_s = 300")),
        {"B_TOKEN": "b-token-0123456789abcdef"},
    )
    assert stuck.stuck_after_s == 300.0
    assert not config.metrics_topic_level
    per_topic = load(
        write(
            tmp_path, GOOD.replace("[rate_limits]", "[metrics]\ntopic_level = true\n[rate_limits]")
        ),
        {"B_TOKEN": "b-token-0123456789abcdef"},
    )
    assert per_topic.metrics_topic_level
    assert config.open
    assert config.local.kind is ClusterKind.GEOREP
    pulsar = load(
        write(tmp_path, GOOD.replace('name = "A"', 'name = "A"\nkind = "pulsar"')),
        {"B_TOKEN": "b-token-0123456789abcdef"},
    )
    assert pulsar.local.kind is ClusterKind.PULSAR


def test_a_remote_across_a_wan_names_its_listener_and_keepalive(tmp_path) -> None:
    from georep import limits

    config = load(write(tmp_path, GOOD), {"B_TOKEN": "b-token-0123456789abcdef"})
    far = config.remotes["B"]
    assert far.listener_name is None
    assert far.keepalive_interval_s == limits.link_keepalive_interval_s_default
    text = GOOD.replace(
        'token_env = "B_TOKEN"',
        'token_env = "B_TOKEN"\nlistener_name = "wan"\nkeepalive_interval_s = 6',
    )
    far = load(write(tmp_path, text), {"B_TOKEN": "b-token-0123456789abcdef"}).remotes["B"]
    assert (far.listener_name, far.keepalive_interval_s) == ("wan", 6.0)
    assert far.replication_window_entries == limits.replicator_pending_sends_count_max
    text = text.replace("keepalive_interval_s = 6", "replication_window_entries = 200")
    far = load(write(tmp_path, text), {"B_TOKEN": "b-token-0123456789abcdef"}).remotes["B"]
    assert far.replication_window_entries == 200


def test_limits_default_from_limits_py_and_may_be_raised(tmp_path) -> None:
    from georep import limits

    config = load(write(tmp_path, GOOD), {"B_TOKEN": "b-token-0123456789abcdef"})
    assert config.replicators_max == limits.gateway_replicators_count_max
    assert config.sync_topics_max == limits.sync_topics_count_max
    text = GOOD + "\n[limits]\nreplicators_max = 100000\nsync_topics_max = 50000\n"
    config = load(write(tmp_path, text), {"B_TOKEN": "b-token-0123456789abcdef"})
    assert (config.replicators_max, config.sync_topics_max) == (100_000, 50_000)


def test_tokens_from_files_and_the_environment(tmp_path) -> None:
    (tmp_path / "tokens").write_text("# admins\nadmin-token-0123456789\n")
    text = GOOD.replace("discovery_interval_s = 1.5", 'token_file = "tokens"')
    config = load(write(tmp_path, text), {"B_TOKEN": "b-token-0123456789abcdef"})
    assert not config.open and len(config.admin_tokens) == 1
    env = {"B_TOKEN": "b-token-0123456789abcdef", "GEOREP_GATEWAY_TOKENS": "x-token-0123456789"}
    assert len(load(write(tmp_path, text), env).admin_tokens) == 2


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (("[rate_limits]", "[rate_limit]"), "unknown key(s) rate_limit"),
        (('name = "A"', 'name = "A B"'), "cluster name 'A B'"),
        (('service_url = "pulsar://127.0.0.1:6650"', 'service_url = "http://x:1"'), "pulsar://"),
        (('"public/default" = ["B", "A"]', '"public/default" = ["Z"]'), "unknown cluster(s)"),
        (('"public/default" = ["B", "A"]', '"bad" = ["B"]'), "tenant/namespace"),
        (('listen = "127.0.0.1:0"', 'listen = "nowhere"'), "host:port"),
        (("messages_per_s = 1000", "messages_per_s = -5"), ">= 0 (0: unlimited)"),
        (('token_env = "B_TOKEN"', 'token_env = "UNSET_VARIABLE"'), "UNSET_VARIABLE"),
        (("[remotes.B]", "[remotes.A]"), "is the local cluster"),
        (("discovery_interval_s = 1.5", "discovery_interval_s = true"), "number"),
        (("pulsar://10.0.0.2:6650", "pulsar://10.0.0.2:0"), "port must be 1..65535"),
        (("pulsar://10.0.0.2:6650", "pulsar://10.0.0.2:99999"), "Port out of range"),
        (("http://10.0.0.2:8080", "http://10.0.0.2"), "port must be 1..65535"),
        (("http://10.0.0.2:8080", "http://10.0.0.2:8080/x?y"), "use http://host:port"),
        (("pulsar://10.0.0.2:6650", "pulsar://127.0.0.1:6650"), "is the local cluster's"),
        (("http://10.0.0.2:8080", "http://127.0.0.1:8080"), "is the local cluster's"),
        (('name = "A"', 'name = ".."'), "path step"),
        (("discovery_interval_s = 1.5", 'allowed_hosts = "x"'), "allowed_hosts"),
        (
            ("discovery_interval_s = 1.5", "stuck_after_s = 1"),
            "[gateway] stuck_after_s must be in [5, 86400]",
        ),
        (("discovery_interval_s = 1.5", 'stuck_after_s = "60"'), "number > 0"),
        (("[rate_limits]", "[metrics]\ntopic_level = 1\n[rate_limits]"), "true or false"),
        (("[rate_limits]", "[metrics]\ntopics = true\n[rate_limits]"), "topics"),
        (('name = "A"', 'name = "A"\nkind = "kafka"'), "kind 'kafka': use one of georep, pulsar"),
        (("[rate_limits]", "[limits]\nreplicators_max = -1\n[rate_limits]"), "whole number"),
        (("[rate_limits]", "[limits]\nsync_topics_max = 1e9\n[rate_limits]"), "whole number"),
        (("[rate_limits]", "[limits]\nsync_topic_max = 5\n[rate_limits]"), "sync_topic_max"),
        (('token_env = "B_TOKEN"', 'token_env = "B_TOKEN"\nlistener_name = 5'), "listener_name"),
        (('token_env = "B_TOKEN"', 'token_env = "B_TOKEN"\nkeepalive_interval_s = 0'), "> 0"),
        (
            ('token_env = "B_TOKEN"', 'token_env = "B_TOKEN"\nkeepalive_interval_s = 4'),
            "half the request timeout",
        ),
        (
            ('token_env = "B_TOKEN"', 'token_env = "B_TOKEN"\nreplication_window_entries = 0'),
            "replication_window_entries must be a whole number from 1 to",
        ),
        (
            ('token_env = "B_TOKEN"', 'token_env = "B_TOKEN"\nreplication_window_bytes = 10'),
            "replication_window_bytes must be a whole number from",
        ),
        (
            (
                'admin_url = "http://127.0.0.1:8080"',
                'admin_url = "http://127.0.0.1:8080"\nreplication_window_entries = 10',
            ),
            "a window is a remote's",
        ),
    ],
)
def test_mistakes_are_named(tmp_path, change, words) -> None:
    old, new = change
    assert old in GOOD
    with pytest.raises(ConfigError) as caught:
        load(write(tmp_path, GOOD.replace(old, new)), {"B_TOKEN": "b-token-0123456789abcdef"})
    assert words in str(caught.value)


def test_not_toml_and_missing_sections(tmp_path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load(write(tmp_path, "[gateway"))
    with pytest.raises(ConfigError, match=r"\[local\] is required"):
        parse({})
    with pytest.raises(ConfigError, match="cannot read"):
        load(tmp_path / "missing.toml")


def test_the_shared_admin_token_reaches_every_cluster_without_a_source(tmp_path) -> None:
    text = GOOD.replace('token_env = "B_TOKEN"\n', "")
    config = load(write(tmp_path, text), {"GEOREP_ADMIN_TOKENS": "first-token-0123456789,x"})
    assert config.local.token_text == "first-token-0123456789"
    assert config.remotes["B"].token_text == "first-token-0123456789"
    assert load(write(tmp_path, text), {}).local.token is None


def test_allowed_hosts(tmp_path) -> None:
    text = GOOD.replace("discovery_interval_s = 1.5", 'allowed_hosts = ["gw.example"]')
    config = load(write(tmp_path, text), {"B_TOKEN": "b-token-0123456789abcdef",
                                          "GEOREP_ALLOWED_HOSTS": "other.example"})  # fmt: skip
    hosts = config.access.allowed_hosts
    assert {"gw.example", "other.example", "localhost", "127.0.0.1"} <= hosts


def test_pulsar_compatible_mode_is_refused_beside_real_pulsar(tmp_path) -> None:
    text = GOOD.replace('name = "A"', 'name = "A"\nkind = "pulsar"')
    text += '[subscription_sync.namespaces."public/default"]\nmode = "pulsar-compatible"\n'
    with pytest.raises(ConfigError) as caught:
        load(write(tmp_path, text), {"B_TOKEN": "b-token-0123456789abcdef"})
    assert 'namespaces."public/default"] mode pulsar-compatible' in str(caught.value)
    assert "Pulsar's own replicated subscriptions" in str(caught.value)


def test_the_example_beside_real_pulsar_loads() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "gateway-pulsar.toml"
    config = load(example, {})
    assert config.local.kind is ClusterKind.PULSAR
    assert config.remotes["B"].kind is ClusterKind.PULSAR
    assert config.seed_namespace_policies == {"payments/eu": ("B",)}
    assert "orders/eu" in config.sync.namespaces
