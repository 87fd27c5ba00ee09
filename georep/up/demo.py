"""``georep up --demo``: messages produced on every cluster with the official
pulsar-client, then read back from every cluster, to show what crossed where.

Expected with ``examples/three-clusters.toml``: A holds A's and B's messages, B holds B's
and A's, C holds C's and A's (A→C one way; B's messages are not passed on by A, and B
and C are unrelated). Each message must be there exactly once; the demo waits up to a
minute for replication.

Then a failover: an application consumes the topic on A with a replicated subscription
(``replicate_subscription_state_enabled``) and acknowledges all but a few messages, out
of order. Consumers of the same subscription that fail over to each cluster A replicates
to must receive exactly those few (and, on C, C's own messages, which A never had): on
C first (A→C is one way), then on B. Returns 0 when every check holds.

Over TLS (``[tls] enabled``) every client of the demo, the official one and its REST
reads, trusts up's CA alone and checks the servers' names (``UpConfig.ca_file``).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import ssl
import time
import urllib.request
from typing import Any

from georep.rest import tokens as token_sources
from georep.up.config import UpConfig

#: The official client's module and objects: pulsar-client ships no types.
_Pulsar = Any

MESSAGES_PER_CLUSTER = 5
WAIT_S = 60.0
DEFAULT_NAMESPACE = "public/default"
SUBSCRIPTION = "demo-app"
#: Messages the application on A leaves unacknowledged, by payload.
LEFT_UNACKED = {"from-A-1", "from-A-3"}


def expected_sources(config: UpConfig, namespace: str) -> dict[str, set[str]]:
    """cluster -> clusters whose messages it should hold (its own, and those of every
    cluster whose gateway replicates ``namespace`` to it; no chains)."""
    holds = {name: {name} for name in config.clusters}
    for source, gateway in config.gateways.items():
        for target in gateway.replicate.get(namespace, []):
            if target != source:
                holds[target].add(source)
    return holds


def run_demo(config: UpConfig) -> int:
    try:
        import pulsar
    except ImportError:
        print(
            "the demo needs pulsar-client: reinstall georep (pip install pulsar-client)", flush=True
        )
        return 2
    namespaces = [n for g in config.gateways.values() for n in g.replicate]
    namespace = (
        DEFAULT_NAMESPACE if DEFAULT_NAMESPACE in namespaces or not namespaces else namespaces[0]
    )
    topic = f"persistent://{namespace}/georep-up-demo-{int(time.time())}"
    scheme = "pulsar+ssl" if config.tls else "pulsar"
    urls = {n: f"{scheme}://{config.host}:{c.broker_port}" for n, c in config.clusters.items()}
    options: dict[str, Any] = {
        "operation_timeout_seconds": 30,
        "logger": pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
    }
    if config.ca_file is not None:
        options["tls_trust_certs_file_path"] = str(config.ca_file)
        options["tls_validate_hostname"] = True
    app = pulsar.Client(urls["A"], **options) if "A" in urls else None
    consumer = None
    if app is not None:  # subscribed before anything is produced: it sees every message
        consumer = app.subscribe(
            topic,
            SUBSCRIPTION,
            consumer_type=pulsar.ConsumerType.Shared,
            replicate_subscription_state_enabled=True,
            initial_position=pulsar.InitialPosition.Earliest,
        )
    print(f"demo: producing {MESSAGES_PER_CLUSTER} messages on each cluster to {topic}", flush=True)
    for name, url in sorted(urls.items()):
        client = pulsar.Client(url, **options)
        try:
            producer = client.create_producer(topic)
            for index in range(MESSAGES_PER_CLUSTER):
                producer.send(f"from-{name}-{index}".encode())
            producer.close()
        finally:
            client.close()

    expected = expected_sources(config, namespace)
    want = {
        name: {f"from-{s}-{i}": 1 for s in sources for i in range(MESSAGES_PER_CLUSTER)}
        for name, sources in expected.items()
    }
    deadline = time.monotonic() + WAIT_S
    while True:
        seen = {name: _read_all(pulsar, url, topic, options) for name, url in urls.items()}
        if seen == want or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    ok = seen == want
    for name in sorted(seen):
        by_source = collections.Counter(text.rsplit("-", 1)[0] for text in seen[name])
        held = ", ".join(f"{source} x{count}" for source, count in sorted(by_source.items()))
        twice = [text for text, count in seen[name].items() if count > 1]
        mark = "ok" if seen[name] == want[name] else "UNEXPECTED"
        extra = f"; twice: {twice}" if twice else ""
        print(f"demo: cluster {name} holds {held or 'nothing'}{extra}  [{mark}]", flush=True)
    print(f"demo: {'every cluster holds what its policies say' if ok else 'MISMATCH'}", flush=True)
    if app is not None and consumer is not None:
        try:
            ok = _failover(pulsar, config, urls, topic, consumer, expected, options) and ok
        finally:
            app.close()
    return 0 if ok else 1


def _failover(
    pulsar: _Pulsar,
    config: UpConfig,
    urls: dict[str, str],
    topic: str,
    consumer: _Pulsar,
    expected: dict[str, set[str]],
    options: dict[str, Any],
) -> bool:
    """Consume on A, leave LEFT_UNACKED, and check what fails over to each remote."""
    received = []
    with contextlib.suppress(pulsar.Timeout):
        while True:
            received.append(consumer.receive(timeout_millis=2000))
    for message in reversed(received):  # out of order on purpose
        if message.data().decode() not in LEFT_UNACKED:
            consumer.acknowledge(message)
    print(
        f"demo: on A, {SUBSCRIPTION} acknowledged {len(received) - len(LEFT_UNACKED)} of"
        f" {len(received)} messages, out of order; left {sorted(LEFT_UNACKED)}",
        flush=True,
    )
    targets = sorted(name for name, sources in expected.items() if "A" in sources and name != "A")
    targets.sort(key=lambda name: name in expected["A"])  # both ways: last
    ok = True
    for name in targets:  # one-way targets first: what B acks would flow back through A
        settled = _wait_synced(config, name, topic)
        got = _drain(pulsar, urls[name], topic, options)
        # the target's own messages that never reached A are new to the subscription
        own = {f"from-{name}-{i}" for i in range(MESSAGES_PER_CLUSTER)}
        want = LEFT_UNACKED | (set() if name in expected["A"] else own)
        good = settled and sorted(got) == sorted(want)
        ok = ok and good
        print(
            f"demo: failed over to {name}: {SUBSCRIPTION} received {sorted(got)}"
            f"  [{'ok' if good else 'UNEXPECTED'}]",
            flush=True,
        )
    return ok


def _stats(config: UpConfig, name: str) -> dict[str, Any] | None:
    gateway = config.gateways.get(name)
    if gateway is None:
        return None
    scheme = "https" if config.tls else "http"
    url = f"{scheme}://{config.host}:{gateway.port}/admin/georep/v1/stats"
    request = urllib.request.Request(url)
    token = _gateway_token(config)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        context = ssl.create_default_context(cafile=config.ca_file) if config.ca_file else None
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            stats: dict[str, Any] = json.load(response)
            return stats
    except OSError:
        return None


def _gateway_token(config: UpConfig) -> str | None:
    """The token the gateways require: the first of their file, or of the variable."""
    if config.gateway_token_file is not None:
        found = token_sources.read_file(str(config.gateway_token_file))
        return found[0] if found else None
    return token_sources.client_token(os.environ, token_sources.GATEWAY_TOKENS_ENV)


def _topic_sync(stats: dict[str, Any] | None, topic: str) -> dict[str, Any]:
    for entry in (stats or {}).get("subscriptionSync", {}).get("topics", []):
        if entry["topic"] == topic:
            found: dict[str, Any] = entry
            return found
    return {}


def _wait_synced(config: UpConfig, name: str, topic: str) -> bool:
    """Until ``name``'s gateway has applied A's last state of the subscription."""
    deadline = time.monotonic() + WAIT_S
    time.sleep(1.0)  # A's gateway polls its subscriptions a few times a second
    while time.monotonic() < deadline:
        source = _topic_sync(_stats(config, "A"), topic).get("subscriptions", {})
        sent = source.get(SUBSCRIPTION, {}).get("source", {}).get("lastSequence")
        there = _topic_sync(_stats(config, name), topic)
        applied = there.get("subscriptions", {}).get(SUBSCRIPTION, {}).get("applied", {})
        state = applied.get("A", {})
        if (
            sent is not None
            and state.get("lastSequence") == sent
            and there.get("pendingApplies") == 0
        ):
            return True
        time.sleep(0.5)
    return False


def _drain(pulsar: _Pulsar, url: str, topic: str, options: dict[str, Any]) -> list[str]:
    client = pulsar.Client(url, **options)
    got = []
    try:
        consumer = client.subscribe(topic, SUBSCRIPTION, consumer_type=pulsar.ConsumerType.Shared)
        with contextlib.suppress(pulsar.Timeout):
            while True:
                message = consumer.receive(timeout_millis=2000)
                got.append(message.data().decode())
                consumer.acknowledge(message)
        consumer.close()
    finally:
        client.close()
    return got


def _read_all(pulsar: _Pulsar, url: str, topic: str, options: dict[str, Any]) -> dict[str, int]:
    seen: collections.Counter[str] = collections.Counter()
    client = pulsar.Client(url, **options)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        with contextlib.suppress(pulsar.Timeout):
            while True:
                seen[reader.read_next(timeout_millis=1000).data().decode()] += 1
        reader.close()
    finally:
        client.close()
    return dict(seen)
