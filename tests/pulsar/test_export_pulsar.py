"""``georep export`` of a real Pulsar 4.0.7 cluster: the messages and the cursors as
``internalStats`` shows them (whole entries), and no batch indexes — Pulsar has no
``sync-state`` — which the summary says (``"batch_acks": "unavailable"``) rather than
failing or pretending."""

from __future__ import annotations

import json
import os
import subprocess

import pulsar
import pyarrow.parquet as pq

from georep.runtime.processes import georep_command


def test_export_of_a_real_pulsar_cluster_has_entries_but_no_batch_indexes(
    pulsar_pair, geo_topic, tmp_path
) -> None:
    a = pulsar_pair["A"]
    client = pulsar.Client(a.service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        consumer = client.subscribe(
            geo_topic, "s", consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest, batch_index_ack_enabled=True,
        )  # fmt: skip
        producer = client.create_producer(
            geo_topic, batching_enabled=True, batching_max_messages=5,
            batching_max_publish_delay_ms=50, block_if_queue_full=True,
        )  # fmt: skip
        for i in range(20):
            producer.send_async(f"m-{i}".encode(), None)
        producer.flush()
        received = [consumer.receive(timeout_millis=10_000) for _ in range(20)]
        for message in received[:3]:  # part of the first batch only
            consumer.acknowledge(message)
        consumer.close()
    finally:
        client.close()

    out = tmp_path / "export"
    done = subprocess.run(
        georep_command("--log-level", "WARNING", "export", "--cluster-admin", a.admin_url,
                       "--service-url", a.service_url, "--topics", geo_topic, "--out", str(out),
                       "--cluster", "A"),
        capture_output=True, text=True, timeout=120, env={**os.environ},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["batch_acks"] == "unavailable"
    assert summary["messages"] == 20 and summary["batch_entries_partly_acknowledged"] == 0

    rows = pq.read_table(out / "subscriptions" / "A.parquet").to_pylist()
    (s,) = [row for row in rows if row["subscription"] == "s"]
    assert s["batch_acks"] == []
    first = received[0].message_id()
    assert (s["mark_delete_ledger_id"], s["mark_delete_entry_id"]) < (
        first.ledger_id(),
        first.entry_id(),
    ), "a batch acknowledged in part is not acknowledged in internalStats"
