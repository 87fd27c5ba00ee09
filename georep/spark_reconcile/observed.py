"""What a drill's delivery log shows happened, per message: duplicates, redeliveries and
losses as the consumers saw them (docs/DRILL.md's definitions), and when each topic's
failover happened. DataFrame transformations: no I/O, nothing collected.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from georep.spark_reconcile.columns import IDENTITY, PLACE
from georep.spark_reconcile.schema import DELIVERY_ACKED


@dataclass(frozen=True)
class Observed:
    duplicates: DataFrame
    redeliveries: DataFrame
    losses: DataFrame


def _phase_rank() -> Column:
    return F.when(F.col("phase") == "before", 0).otherwise(1)


def _kind(first: str, last: str) -> Column:
    """``before``, ``after`` or ``across_failover``: the phases of two ordered deliveries."""
    return F.when(
        (F.col(f"{first}.phase_rank") == 0) & (F.col(f"{last}.phase_rank") == 1),
        "across_failover",
    ).otherwise(F.when(F.col(f"{first}.phase_rank") == 1, "after").otherwise("before"))


def observed(deliveries: DataFrame, local: DataFrame, gap: DataFrame) -> Observed:
    """What the consumers of each subscription actually saw, per message (identity), with
    the drill's definitions (docs/DRILL.md). An ``acked`` delivery is one an
    acknowledgement covered (``schema.DELIVERY_ACKED``; absent or null: acknowledged).
    Deliveries are ordered by phase (``before`` the failover, then ``after``), then by
    time, then unacknowledged before acknowledged (a negatively acknowledged delivery
    and its acknowledged redelivery within one millisecond stay a redelivery; two
    acknowledged deliveries at one instant are a duplicate).

    - a **duplicate** was delivered again after an acknowledged delivery (another
      delivery in order at or after it): consumed twice. ``kind``: the phases of the first
      acknowledged delivery and of the last one — ``across_failover`` is the drill's
      "acknowledged on A and delivered on B";
    - a **redelivery** was delivered more than once, never after an acknowledged
      delivery (a negative acknowledgement, or delivered on A unacknowledged and then on
      B): expected, not a duplicate. ``kind``: the phases of its first and last delivery;
    - a **loss** is a message published on a topic the subscription consumed that was
      neither acknowledged before the failover nor delivered after it. ``cause``:
      ``replication_gap`` when a replica lacks it (the drill reports those as not
      replicated, apart from its losses), ``not_acknowledged`` when it was delivered
      before the failover, else ``not_delivered``.

    Worked example (the drill's): 0..9 published, 0..7 replicated; 0..5 delivered on A
    and 0..3 acknowledged there; 2..7 delivered on B. Duplicates {2, 3}
    (``across_failover``), redeliveries {4, 5}, losses {8, 9} (``replication_gap``). A
    log without ``acked`` makes every delivery acknowledged: every message delivered
    more than once is a duplicate and every one delivered at all is no loss.
    """
    key = [*PLACE, "subscription", *IDENTITY]
    acknowledged = F.coalesce(F.col(DELIVERY_ACKED), F.lit(True))
    before = F.col("phase") == "before"
    order = F.struct(
        _phase_rank().alias("phase_rank"),
        F.col("delivered_at").alias("at"),
        acknowledged.cast("int").alias("acked"),
    )
    per_message = (
        deliveries.groupBy(*key)
        .agg(
            F.count(F.lit(1)).alias("deliveries"),
            F.sum(before.cast("long")).alias("deliveries_before"),
            F.sum((~before).cast("long")).alias("deliveries_after"),
            F.min("delivered_at").alias("first_delivered_at"),
            F.max("delivered_at").alias("last_delivered_at"),
            F.array_sort(F.collect_set("cluster")).alias("clusters"),
            F.max((before & acknowledged).cast("int")).alias("acked_before"),
            F.min(order).alias("_first"),
            F.max(order).alias("_last"),
            F.min(F.when(acknowledged, order)).alias("_first_ack"),
            F.collect_list(order).alias("_orders"),
        )
        .withColumn(
            "_from_first_ack",
            F.size(F.filter("_orders", lambda o: o >= F.col("_first_ack"))),
        )
        .withColumn("first_acked_at", F.col("_first_ack.at"))
    )
    published = local.select(*PLACE, *IDENTITY, "publish_time")
    columns = [*key, "deliveries", "deliveries_before", "deliveries_after",
               "first_delivered_at", "first_acked_at", "last_delivered_at", "clusters"]  # fmt: skip
    duplicate = F.col("_from_first_ack") > 1
    duplicates = (
        per_message.where(duplicate)
        .select(*columns, _kind("_first_ack", "_last").alias("kind"))
        .join(published, on=[*PLACE, *IDENTITY], how="left")
    )
    redeliveries = (
        per_message.where((F.col("deliveries") > 1) & ~duplicate)
        .select(*columns, _kind("_first", "_last").alias("kind"))
        .join(published, on=[*PLACE, *IDENTITY], how="left")
    )
    consumed = deliveries.select("topic", "subscription").distinct()
    settled = per_message.where((F.col("deliveries_after") > 0) | (F.col("acked_before") == 1))
    delivered = per_message.select(*key, F.lit(True).alias("delivered"))
    missing_anywhere = gap.select(*PLACE, *IDENTITY).distinct().withColumn("in_gap", F.lit(True))
    losses = (
        published.join(F.broadcast(consumed), on="topic")
        .join(settled.select(*key), on=key, how="left_anti")
        .join(delivered, on=key, how="left")
        .join(missing_anywhere, on=[*PLACE, *IDENTITY], how="left")
        .withColumn(
            "cause",
            F.when(F.col("in_gap"), "replication_gap")
            .when(F.col("delivered"), "not_acknowledged")
            .otherwise("not_delivered"),
        )
        .drop("in_gap", "delivered")
    )
    return Observed(duplicates=duplicates, redeliveries=redeliveries, losses=losses)


def failover_windows(deliveries: DataFrame) -> DataFrame:
    """Per topic of a delivery log, when its failover happened as the log tells it: the
    last delivery before it and the first after it (epoch ms; either may be null)."""
    at_ms = F.unix_millis("delivered_at")
    return deliveries.groupBy("topic").agg(
        F.max(F.when(F.col("phase") == "before", at_ms)).alias("last_before_ms"),
        F.min(F.when(F.col("phase") == "after", at_ms)).alias("first_after_ms"),
    )
