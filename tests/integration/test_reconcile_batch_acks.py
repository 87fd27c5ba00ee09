"""The audit at message precision, end to end: batched topics acknowledged in part.

Clusters A and B and a gateway on A replicating ``audit/batched`` to B, subscription sync
off (so nothing but the consumers below moves a cursor). The official client publishes
on A with batching on (batches of up to 10); once B holds every copy:

- subscription ``s1`` on A (Shared, ``batch_index_ack_enabled``) acknowledges a random
  part of the messages one by one; ``s1`` exists on B and acknowledges nothing;
- subscription ``s2`` on B acknowledges a random part of the copies the same way; ``s2``
  exists on A and acknowledges nothing.

Both clusters are exported with ``georep export`` and reconciled by the Spark job
(``spark_reconcile/job.py``, on the session's Spark). The expected figures come from the
consumers' own acknowledgements: every message ``s1`` acknowledged on A is at redelivery
risk on B, every copy ``s2`` acknowledged on B is at skip risk, and nothing else. Most
acknowledged messages sit in batches acknowledged only in part, so an audit at entry
precision would count a small fraction of them (the test checks that there are such
batches)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import time

import pulsar
import pyarrow.parquet as pq
import pytest

from georep.runtime.processes import georep_command
from tests.harness.broker_cluster import open_client
from tests.harness.gateway import World, admin_url, http, payloads_on
from tests.harness.waiting import wait_for

pytest.importorskip("pyspark")
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

NAMESPACE = "audit/batched"
TOPIC = f"persistent://{NAMESPACE}/orders"
MESSAGES = 1_500
SYNC_OFF = '\n[subscription_sync]\nmode = "off"\n'

Identity = tuple[int, int, int]  # A's (ledger, entry, batch index)


def georep(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        georep_command("--log-level", "WARNING", *args),
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("batch-acks")
    topology = World(root, names=("A", "B"))
    try:
        topology.start(
            [NAMESPACE],
            {
                "A": {
                    "remotes": [topology.b],
                    "policies": {NAMESPACE: ["B"]},
                    "extra_toml": SYNC_OFF,
                }
            },
        )
    except BaseException:
        topology.stop()
        raise
    yield topology
    topology.stop()


def ids(message: pulsar.Message) -> Identity:
    message_id = message.message_id()
    return message_id.ledger_id(), message_id.entry_id(), message_id.batch_index()


def consume_and_ack_some(url: str, subscription: str, rng: random.Random, share: float):
    """Receive every message of TOPIC on ``subscription``, acknowledge each with
    probability ``share``; return (payload -> message id, payloads acknowledged)."""
    seen: dict[bytes, Identity] = {}
    acked: set[bytes] = set()
    with open_client(url) as client:
        consumer = client.subscribe(
            TOPIC, subscription, consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest,
            batch_index_ack_enabled=True, receiver_queue_size=MESSAGES,
        )  # fmt: skip
        while len(seen) < MESSAGES:
            message = consumer.receive(timeout_millis=20_000)
            seen[message.data()] = ids(message)
            if rng.random() < share:
                consumer.acknowledge(message)
                acked.add(message.data())
        consumer.close()  # flushes the acknowledgements still grouped in the client
    return seen, acked


def create_subscription(url: str, subscription: str) -> None:
    with open_client(url) as client:
        client.subscribe(
            TOPIC, subscription, initial_position=pulsar.InitialPosition.Earliest
        ).close()


def sync_state(cluster) -> dict:
    status, state = http(
        "GET", f"{admin_url(cluster)}/admin/georep/v1/persistent/{NAMESPACE}/orders/sync-state"
    )
    assert status == 200, state
    return state["subscriptions"]


def settled(cluster) -> dict:
    """The subscriptions' state once two reads half a second apart agree."""
    previous = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = sync_state(cluster)
        if state == previous:
            return state
        previous = state
        time.sleep(0.5)
    raise TimeoutError("acknowledgements did not settle")


def test_reconcile_counts_batch_index_acknowledgements_per_message(world, spark, tmp_path) -> None:
    create_subscription(world.a.url, "s2")  # creates the topic; replication starts from here
    wait_for(lambda: world.gateways["A"].replicators(TOPIC), timeout_s=60)
    with open_client(world.a.url) as client:
        producer = client.create_producer(
            TOPIC, batching_enabled=True, batching_max_messages=10,
            batching_max_publish_delay_ms=20, block_if_queue_full=True,
        )  # fmt: skip
        for i in range(MESSAGES):
            producer.send_async(f"m-{i}".encode(), None)
        producer.flush()
        producer.close()
    create_subscription(world.b.url, "s1")

    wait_for(lambda: len(payloads_on(world.b.url, TOPIC, quiet_ms=500)) == MESSAGES,
             timeout_s=120)  # fmt: skip

    rng = random.Random(20261125)
    on_a, acked_on_a = consume_and_ack_some(world.a.url, "s1", rng, 0.4)
    on_b, acked_on_b = consume_and_ack_some(world.b.url, "s2", rng, 0.3)
    assert set(on_a) == set(on_b), "B holds a copy of every message"
    a_state, b_state = settled(world.a), settled(world.b)
    partly = len(a_state["s1"]["batches"]) + len(b_state["s2"]["batches"])
    assert partly > 0, "the random acknowledgements leave batches acknowledged in part"
    assert a_state["s2"]["batches"] == [] and b_state["s1"]["batches"] == []

    exports = []
    for cluster in (world.a, world.b):
        out = tmp_path / f"export-{cluster.name}"
        done = georep("export", "--cluster-admin", admin_url(cluster), "--service-url",
                      cluster.url, "--topics", TOPIC, "--out", str(out))  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        summary = json.loads(done.stdout)
        assert summary["batch_acks"] == "sync-state"
        assert summary["messages"] == MESSAGES and summary["unmapped_copies"] == 0
        exports.append(str(out))

    # reconciled on the session's Spark (tests/conftest.py): the command itself is run end
    # to end by test_export_cluster.py, and a JVM of its own costs the suite half a minute
    from georep.spark_reconcile import job
    from georep.spark_reconcile.inputs import check_exports

    report = tmp_path / "report"
    totals = job.reconcile(spark, check_exports(exports), None, report, quiet=True)
    assert totals["replication_gap"] == 0 and totals["duplicate_copies"] == 0
    assert totals["batch_entries_partly_acked"] == partly

    rows = pq.read_table(report / "subscription_summary").to_pylist()
    by_subscription = {r["subscription"]: r for r in rows}
    s1, s2 = by_subscription["s1"], by_subscription["s2"]
    assert (s1["origin_cluster"], s1["replica_cluster"]) == ("A", "B")
    assert s1["acked_on_origin"] == len(acked_on_a)
    assert s1["redelivery_risk"] == len(acked_on_a) and s1["skip_risk"] == 0
    assert s2["acked_on_origin"] == 0 and s2["redelivery_risk"] == 0
    assert s2["skip_risk"] == len(acked_on_b)
    assert totals["redelivery_risk"] == len(acked_on_a)
    assert totals["skip_risk"] == len(acked_on_b)

    # and message by message: the skip-risk rows are exactly the copies s2 acknowledged
    skips = pq.read_table(report / "skip_risk").to_pylist()
    assert sorted((r["origin_ledger_id"], r["origin_entry_id"], r["batch_index"])
                  for r in skips) == sorted(on_a[p] for p in acked_on_b)  # fmt: skip
    risk = pq.read_table(report / "redelivery_risk").to_pylist()
    assert sorted((r["origin_ledger_id"], r["origin_entry_id"], r["batch_index"])
                  for r in risk) == sorted(on_a[p] for p in acked_on_a)  # fmt: skip
