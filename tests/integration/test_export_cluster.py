"""``georep export`` against a real ``georep cluster`` process, and ``georep reconcile`` on
what it wrote: published with the official client (single messages, copies carrying
``georep.origin.*`` properties, a batch, a partitioned topic), acknowledged out of order
by a subscription, exported, and the Parquet rows checked against the message ids the
client saw and the cursor the admin REST shows; Avro messages under two versions of a
schema, exported with their version and which schema it names."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid

import pulsar
import pyarrow.parquet as pq
import pytest
from pulsar.schema import AvroSchema

from georep.client.link import PulsarLink
from georep.drill.avro_records import SCHEMA_V1, SCHEMA_V2
from georep.spark_reconcile import schema
from georep.wire import batch as batch_format
from georep.wire import pulsar_wire_pb2 as pb
from tests.harness.broker_cluster import ClusterProcess, open_client

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

NAMESPACE = "public/default"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    process = ClusterProcess(tmp_path_factory.mktemp("export") / "b", name="B")
    process.start()
    yield process
    process.kill()


def admin(cluster: ClusterProcess) -> str:
    return f"http://127.0.0.1:{cluster.admin_port}"


def put(url: str, body) -> None:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="PUT",
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=15) as answer:
        assert answer.status in (200, 204)


def internal_stats(cluster: ClusterProcess, topic: str) -> dict:
    path = topic.removeprefix("persistent://")
    with urllib.request.urlopen(f"{admin(cluster)}/admin/v2/persistent/{path}/internalStats") as a:
        return json.loads(a.read())


def georep(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "georep", *args],
        capture_output=True, text=True, timeout=200,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip


async def publish_as_the_gateway(url: str, topic: str) -> None:
    """A batch of 3 replicated from A's entry 9:4 the way the gateway stores it: origin
    properties on the entry's metadata, which the official client does not show for the
    messages of a batch."""
    payload, count = batch_format.build_batch(
        [(pb.SingleMessageMetadata(payload_size=0), b"replicated-%d" % i) for i in range(3)]
    )
    metadata = pb.MessageMetadata(
        producer_name="georep.repl.A", sequence_id=(9 << 24) | 4, highest_sequence_id=(9 << 24) | 4,
        publish_time=int(time.time() * 1000), num_messages_in_batch=count, replicated_from="A",
        properties=[pb.KeyValue(key="georep.origin.cluster", value="A"),
                    pb.KeyValue(key="georep.origin.position", value="9:4")],
    )  # fmt: skip
    link = PulsarLink(url)
    try:
        producer = await link.create_producer(topic, "georep.repl.A")
        await (await producer.send(metadata, payload, num_messages=count))
        await producer.close()
    finally:
        await link.close()


def ids(message_id) -> tuple[int, int, int]:
    return message_id.ledger_id(), message_id.entry_id(), message_id.batch_index()


def test_export_then_reconcile(cluster, tmp_path) -> None:
    suffix = uuid.uuid4().hex[:8]
    topic = f"persistent://{NAMESPACE}/orders-{suffix}"
    partitioned = f"persistent://{NAMESPACE}/payments-{suffix}"
    put(f"{admin(cluster)}/admin/v2/persistent/{NAMESPACE}/payments-{suffix}/partitions", 2)

    with open_client(cluster.url) as client:
        consumer = client.subscribe(
            topic, "s", consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest,
        )  # fmt: skip
        single = client.create_producer(topic, batching_enabled=False)
        local_ids = [ids(single.send(b"local-%d" % i, partition_key=f"k{i}")) for i in range(5)]
        copy_ids = [
            ids(single.send(b"copy-%d" % i, properties={
                "georep.origin.cluster": "A", "georep.origin.position": f"7:{i}"}))
            for i in range(3)
        ]  # fmt: skip
        batching = client.create_producer(
            topic, batching_enabled=True, batching_max_publish_delay_ms=100
        )
        for i in range(3):
            batching.send_async(b"batched-%d" % i, None)
        batching.flush()
        asyncio.run(publish_as_the_gateway(cluster.url, topic))
        to_partitions = client.create_producer(partitioned, batching_enabled=False)
        partition_ids = [
            to_partitions.send(b"p-%d" % i, partition_key=f"key-{i}") for i in range(6)
        ]

        received = {}
        for _ in range(14):
            message = consumer.receive(timeout_millis=10_000)
            received[ids(message.message_id())] = message
        # out of order: the first two (MDP moves), then the 4th and the first copy
        for position in (local_ids[0], local_ids[1], local_ids[3], copy_ids[0]):
            consumer.acknowledge(received[position])
        consumer.close()

    ledger = local_ids[0][0]
    expected_mdp = f"{ledger}:{local_ids[1][1]}"
    deadline = time.monotonic() + 30
    while True:  # acknowledgements reach the cursor asynchronously
        cursor = internal_stats(cluster, topic)["cursors"]["s"]
        settled = cursor["markDeletePosition"] == expected_mdp and (
            cursor["individuallyDeletedMessages"].count("(") == 2
        )
        if settled or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert cursor["markDeletePosition"] == expected_mdp, cursor

    out = tmp_path / "export"
    pattern = f"persistent://{NAMESPACE}/*-{suffix}"
    done = georep("export", "--cluster-admin", admin(cluster), "--service-url", cluster.url,
                  "--topics", pattern, "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["cluster"] == "B" and summary["topic_partitions"] == 3
    assert summary["messages"] == 14 + 6 and summary["unmapped_copies"] == 0
    assert summary["copies_resolved_from_entries"] == 3
    assert summary["batch_acks"] == "sync-state"

    messages_file = pq.ParquetFile(out / "messages" / "B.parquet")
    version = schema.SCHEMA_VERSION
    assert messages_file.schema_arrow.metadata[schema.VERSION_KEY] == str(version).encode()
    rows = messages_file.read().to_pylist()
    assert {r["schema_version"] for r in rows} == {version}
    on_topic = {(r["ledger_id"], r["entry_id"], r["batch_index"]): r for r in rows
                if r["topic"] == topic}  # fmt: skip
    assert set(on_topic) == set(received)
    for position in local_ids:
        row = on_topic[position]
        assert (row["origin_cluster"], row["origin_ledger_id"], row["origin_entry_id"]) == (
            "B",
            position[0],
            position[1],
        )
        assert row["partition"] == -1 and row["key"] == f"k{local_ids.index(position)}"
    for i, position in enumerate(copy_ids):
        row = on_topic[position]
        assert (row["origin_cluster"], row["origin_ledger_id"], row["origin_entry_id"]) == (
            "A",
            7,
            i,
        )
    batches = sorted(p for p in on_topic if p not in local_ids and p not in copy_ids)
    local_batch = [p for p in batches if on_topic[p]["origin_cluster"] == "B"]
    assert len({(p[0], p[1]) for p in local_batch}) == 1, "one entry"
    assert [p[2] for p in local_batch] == [0, 1, 2]
    assert all(on_topic[p]["origin_entry_id"] == p[1] for p in local_batch)
    assert all(on_topic[p]["size"] == len(b"batched-0") for p in local_batch)
    replicated = [p for p in batches if on_topic[p]["origin_cluster"] == "A"]
    assert [(on_topic[p]["origin_ledger_id"], on_topic[p]["origin_entry_id"], p[2])
            for p in replicated] == [(9, 4, 0), (9, 4, 1), (9, 4, 2)]  # fmt: skip

    by_partition = sorted(
        (r["partition"], r["ledger_id"], r["entry_id"]) for r in rows if r["topic"] == partitioned
    )
    assert by_partition == sorted(
        (m.partition(), m.ledger_id(), m.entry_id()) for m in partition_ids
    )

    subscriptions = pq.read_table(out / "subscriptions" / "B.parquet").to_pylist()
    (s,) = [r for r in subscriptions if r["topic"] == topic and r["subscription"] == "s"]
    assert (s["mark_delete_ledger_id"], s["mark_delete_entry_id"]) == (ledger, local_ids[1][1])
    acked = [(ledger, local_ids[3][1]), (ledger, copy_ids[0][1])]
    assert [(r["upper_ledger_id"], r["upper_entry_id"]) for r in s["individually_deleted"]] == acked
    assert [(r["lower_ledger_id"], r["lower_entry_id"] + 1) for r in s["individually_deleted"]] == (
        acked
    )
    assert s["batch_acks"] == [], "the consumer acknowledged no batch in part"

    report = tmp_path / "report"
    done = georep("reconcile", "--input", str(out), "--out", str(report),
                  "--master", "local[2]", "--driver-memory-mib", "1024")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    totals = json.loads(done.stdout.strip().splitlines()[-1])
    assert totals["messages"] == 20 and totals["replication_gap"] == 0
    assert (report / "report.html").read_text().count("<svg") == 2
    # Spark silent: the command's own steps only (and the JVM's line about its modules)
    others = [
        line for line in done.stderr.splitlines()
        if not line.startswith("reconcile: [") and "incubator modules" not in line
    ]  # fmt: skip
    assert others == [], others


def test_export_records_each_messages_schema(cluster, tmp_path) -> None:
    """Each row names its message's schema version and which schema that version is on
    the cluster (a fingerprint of the registered definition); a schema-less message
    names neither."""
    topic = f"persistent://{NAMESPACE}/readings-{uuid.uuid4().hex[:8]}"
    with open_client(cluster.url) as client:
        for definition in (SCHEMA_V1, SCHEMA_V2):
            schema_of = AvroSchema(None, schema_definition=definition)
            producer = client.create_producer(topic, schema=schema_of, batching_enabled=False)
            for index in range(2):
                producer.send({"id": f"m{index}", "index": index, "key": "k", "note": "n"})
            producer.close()
        client.create_producer(topic, batching_enabled=False).send(b"raw")
    out = tmp_path / "export"
    done = georep("export", "--cluster-admin", admin(cluster), "--service-url", cluster.url,
                  "--topics", topic, "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = sorted(
        pq.read_table(out / "messages" / "B.parquet").to_pylist(), key=lambda r: r["entry_id"]
    )
    path = topic.removeprefix("persistent://")
    registered = {}
    for version in (0, 1):
        url = f"{admin(cluster)}/admin/v2/schemas/{path}/schema/{version}"
        with urllib.request.urlopen(url, timeout=15) as answer:
            registered[version] = schema.schema_fingerprint(
                "AVRO", json.loads(answer.read())["data"]
            )
    assert registered[0] != registered[1]
    assert [(r["payload_schema_version"], r["payload_schema"]) for r in rows] == [
        (0, registered[0]), (0, registered[0]), (1, registered[1]), (1, registered[1]),
        (None, None),
    ]  # fmt: skip


def test_export_of_an_unreachable_cluster_fails_cleanly(tmp_path) -> None:
    done = georep("export", "--cluster-admin", "http://127.0.0.1:9", "--service-url",
                  "pulsar://127.0.0.1:9", "--out", str(tmp_path / "x"))  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("georep export: error: admin REST")
    assert "Traceback" not in done.stderr
