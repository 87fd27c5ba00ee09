"""Reconciliation benchmark: the Spark job on N synthetic message rows, export-free.

Spark itself generates two clusters' exports (``spark.range`` and column arithmetic, no
Python loop over rows) in the layout ``georep export`` writes, then the job runs on them
exactly as ``georep reconcile`` does (its own local Spark, default settings). Prints one
JSON object: input rows, rows/s and wall time of the reconciliation (generation apart).

Synthetic failover, origin A replicating to B, on 4 topics x 2 partitions:

- A publishes N/2 messages in batches of 4; ledgers roll over every 50,000 entries;
- B holds a copy of each, except the last 1 % of every partition's entries (the gap at
  failover), and 1 entry in 1,000 is stored twice on B (duplicate copies);
- subscription ``orders`` acknowledged 80 % of every partition on A plus 1,000 ranges
  out of order above it and, above those, indexes 0 and 2 of 1,000 batches (batch-index
  acknowledgements); on B its MDP was synced to 70 % only, no range was, and indexes 1
  and 3 of 1,000 batches between 70 % and 80 % are acknowledged.

    python bench/reconcile.py [--rows 10000000] [--dir bench/out/reconcile]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from georep import limits  # noqa: E402
from georep.spark_reconcile import job  # noqa: E402
from georep.spark_reconcile.inputs import check_exports  # noqa: E402

TOPICS, PARTITIONS, BATCH = 4, 2, 4
LEDGER_ENTRIES = 50_000
GAP_FRACTION, ORIGIN_ACKED, REPLICA_ACKED = 0.01, 0.80, 0.70
RANGES = 1_000
PARTLY_ACKED_BATCHES = 1_000
BASE_MS = 1_700_000_000_000
#: B stores A's ledger L as L + REPLICA_LEDGERS, and its second copies in L + TWICE_LEDGERS.
REPLICA_LEDGERS, TWICE_LEDGERS = 1_000_000, 2_000_000


def _ledger_of(first_ledger, entry_index):
    from pyspark.sql import functions as F

    return first_ledger + F.floor(entry_index / LEDGER_ENTRIES)


def _entry_of(entry_index):
    return (entry_index % LEDGER_ENTRIES).cast("long")


def generate(spark, root: Path, origin_rows: int) -> dict:
    from pyspark.sql import functions as F

    lanes = TOPICS * PARTITIONS
    entries = origin_rows // lanes // BATCH  # per partition
    ids = spark.range(entries * lanes * BATCH)
    lane = F.col("id") % lanes
    k = F.floor(F.col("id") / lanes)
    entry_index = F.floor(k / BATCH)
    base = ids.select(
        F.concat(F.lit("persistent://bench/geo/topic-"), (lane / PARTITIONS).cast("int")).alias(
            "topic"
        ),
        (lane % PARTITIONS).cast("int").alias("partition"),
        (F.lit(100) + lane * 1000 + F.floor(entry_index / LEDGER_ENTRIES)).alias("ledger_id"),
        (entry_index % LEDGER_ENTRIES).alias("entry_id"),
        entry_index.alias("entry_index"),
        (k % BATCH).cast("int").alias("batch_index"),
        F.timestamp_millis(F.lit(BASE_MS) + k).alias("publish_time"),
    )

    def as_export(frame, cluster: str, origin_ledger, origin_entry):
        return frame.select(
            F.lit(2).alias("schema_version"),
            F.lit(cluster).alias("cluster"),
            "topic", "partition", "ledger_id", "entry_id", "batch_index",
            F.lit("A").alias("origin_cluster"),
            origin_ledger.alias("origin_ledger_id"),
            origin_entry.alias("origin_entry_id"),
            F.concat(F.lit("key-"), (F.col("entry_index") % 97).cast("string")).alias("key"),
            "publish_time",
            F.lit(None).cast("timestamp").alias("event_time"),
            F.lit(100).alias("size"),
        )  # fmt: skip

    origin = as_export(base, "A", F.col("ledger_id"), F.col("entry_id"))
    copied = base.where(F.col("entry_index") < int(entries * (1 - GAP_FRACTION)))
    moved = copied.select(
        "*",
        (F.col("ledger_id") + REPLICA_LEDGERS).alias("replica_ledger_id"),
        F.col("entry_id").alias("replica_entry_id"),
    )
    twice = copied.where(F.col("entry_index") % 1000 == 7).select(
        "*",
        (F.col("ledger_id") + TWICE_LEDGERS).alias("replica_ledger_id"),
        F.col("entry_id").alias("replica_entry_id"),
    )
    replica = as_export(
        moved.unionByName(twice)
        .drop("ledger_id", "entry_id")
        .withColumnRenamed("replica_ledger_id", "ledger_id")
        .withColumnRenamed("replica_entry_id", "entry_id")
        .withColumn(
            "origin_ledger_id",
            F.col("ledger_id")
            - F.when(F.col("ledger_id") >= TWICE_LEDGERS, TWICE_LEDGERS).otherwise(REPLICA_LEDGERS),
        ),
        "B",
        F.col("origin_ledger_id"),
        F.col("entry_id"),
    )
    for cluster, frame in (("A", origin), ("B", replica)):
        frame.write.mode("overwrite").parquet(str(root / cluster / "messages"))

    def subscriptions(cluster: str, acked_fraction: float, ranges: bool, ledger_offset: int):
        """One row per partition: MDP at ``acked_fraction`` of its entries and, on A,
        RANGES ranges of one entry each, every other entry above the MDP, then
        PARTLY_ACKED_BATCHES batches with indexes 0 and 2 acknowledged, every other entry
        above the ranges; on B as many batches with indexes 1 and 3 acknowledged, every
        tenth entry above its MDP."""
        mdp_index = int(entries * acked_fraction)
        lanes_frame = spark.range(lanes).select(
            F.col("id").alias("lane"),
            F.concat(
                F.lit("persistent://bench/geo/topic-"), (F.col("id") / PARTITIONS).cast("int")
            ).alias("topic"),
            (F.col("id") % PARTITIONS).cast("int").alias("partition"),
        )
        ledger = F.lit(100 + ledger_offset) + F.col("lane") * 1000
        mdp_ledger = ledger + mdp_index // LEDGER_ENTRIES
        mdp_entry = F.lit(mdp_index % LEDGER_ENTRIES)
        individual = F.array().cast(
            "array<struct<lower_ledger_id:bigint,lower_entry_id:bigint,"
            "upper_ledger_id:bigint,upper_entry_id:bigint>>"
        )
        if ranges:
            first_batch, step, acked = mdp_index + 2 * RANGES + 2, 2, [0, 2]
        else:
            first_batch, step, acked = mdp_index + 1, 10, [1, 3]
        batch_acks = F.transform(
            F.sequence(F.lit(0), F.lit(PARTLY_ACKED_BATCHES - 1)),
            lambda j: F.struct(
                _ledger_of(ledger, first_batch + step * j).cast("long").alias("ledger_id"),
                _entry_of(first_batch + step * j).alias("entry_id"),
                F.lit(BATCH).alias("batch_size"),
                F.array(*[F.lit(i) for i in acked]).alias("acked_indexes"),
            ),
        )
        if ranges:
            individual = F.transform(
                F.sequence(F.lit(1), F.lit(RANGES)),
                lambda i: F.struct(
                    _ledger_of(ledger, mdp_index + 2 * i).alias("lower_ledger_id"),
                    _entry_of(mdp_index + 2 * i).alias("lower_entry_id"),
                    _ledger_of(ledger, mdp_index + 2 * i + 1).alias("upper_ledger_id"),
                    _entry_of(mdp_index + 2 * i + 1).alias("upper_entry_id"),
                ),
            )  # fmt: skip
        return lanes_frame.select(
            F.lit(2).alias("schema_version"),
            F.lit(cluster).alias("cluster"),
            "topic", "partition",
            F.lit("orders").alias("subscription"),
            mdp_ledger.cast("long").alias("mark_delete_ledger_id"),
            mdp_entry.cast("long").alias("mark_delete_entry_id"),
            individual.alias("individually_deleted"),
            batch_acks.alias("batch_acks"),
            F.timestamp_millis(F.lit(BASE_MS + 10**9)).alias("captured_at"),
        )  # fmt: skip

    subscriptions("A", ORIGIN_ACKED, True, 0).write.mode("overwrite").parquet(
        str(root / "A" / "subscriptions")
    )
    subscriptions("B", REPLICA_ACKED, False, REPLICA_LEDGERS).write.mode("overwrite").parquet(
        str(root / "B" / "subscriptions")
    )
    return {"entries_per_partition": entries, "partitions": lanes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows",
        type=int,
        default=10_000_000,
        help="message rows over both clusters (about half on each)",
    )
    parser.add_argument("--dir", type=Path, default=REPO / "bench" / "out" / "reconcile")
    parser.add_argument(
        "--driver-memory-mib", type=int, default=limits.reconcile_driver_memory_mib_default
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    args = parser.parse_args()  # fmt: skip

    inputs, out = args.dir / "in", args.dir / "out"
    shutil.rmtree(args.dir, ignore_errors=True)
    spark = job.start_spark(
        driver_memory_mib=args.driver_memory_mib,
        conf={
            # the generated exports are read by pyarrow's footer check too
            "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS",
        },
    )
    try:
        started = time.monotonic()
        shape = generate(spark, inputs, args.rows // 2)
        generate_s = time.monotonic() - started
        spark.catalog.clearCache()

        started = time.monotonic()
        checked = check_exports([str(inputs / "A"), str(inputs / "B")])
        totals = job.reconcile(spark, checked, None, out)
        wall_s = time.monotonic() - started
        cores = spark.sparkContext.defaultParallelism
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(inputs, ignore_errors=True)
    rows = checked.rows["messages"]
    print(
        json.dumps(
            {
                "benchmark": "reconcile",
                "rows": rows,
                "rows_per_s": round(rows / wall_s),
                "wall_s": round(wall_s, 1),
                "generate_s": round(generate_s, 1),
                "spark_cores": cores,
                "driver_memory_mib": args.driver_memory_mib,
                "python": platform.python_version(),
                **shape,
                "totals": totals,
            },
            sort_keys=True,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
