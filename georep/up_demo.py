"""``georep up --demo``: messages produced on every cluster with the official
pulsar-client, then read back from every cluster, to show what crossed where.

Expected with ``examples/three-clusters.toml``: A holds A's and B's messages, B holds B's
and A's, C holds C's and A's (A→C one way; B's messages are not passed on by A, and B
and C are unrelated). Each message must be there exactly once; the demo waits up to a
minute for replication and returns 0 when every cluster holds what the policies say.
"""

from __future__ import annotations

import collections
import contextlib
import time

from georep.up import UpConfig

MESSAGES_PER_CLUSTER = 5
WAIT_S = 60.0
DEFAULT_NAMESPACE = "public/default"


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
        print("the demo needs pulsar-client: pip install 'georep[dev]'", flush=True)
        return 2
    namespaces = [n for g in config.gateways.values() for n in g.replicate]
    namespace = (
        DEFAULT_NAMESPACE if DEFAULT_NAMESPACE in namespaces or not namespaces else namespaces[0]
    )
    topic = f"persistent://{namespace}/georep-up-demo-{int(time.time())}"
    urls = {n: f"pulsar://{config.host}:{c.broker_port}" for n, c in config.clusters.items()}
    logger = pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    print(f"demo: producing {MESSAGES_PER_CLUSTER} messages on each cluster to {topic}", flush=True)
    for name, url in sorted(urls.items()):
        client = pulsar.Client(url, operation_timeout_seconds=30, logger=logger)
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
        seen = {name: _read_all(pulsar, url, topic, logger) for name, url in urls.items()}
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
    return 0 if ok else 1


def _read_all(pulsar, url: str, topic: str, logger) -> dict[str, int]:
    seen: collections.Counter = collections.Counter()
    client = pulsar.Client(url, operation_timeout_seconds=30, logger=logger)
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        with contextlib.suppress(pulsar.Timeout):
            while True:
                seen[reader.read_next(timeout_millis=1000).data().decode()] += 1
        reader.close()
    finally:
        client.close()
    return dict(seen)
