"""What the page shows, from the tables the job wrote: the totals, the timelines per
topic, the first rows of each table and the verdict per link — small aggregates, each
bounded by ``limits.reconcile_report_*`` and collected once (``report.py`` draws them).

The transformations here (``timeline_counts``, ``link_totals``, ...) read only written
tables and the message index; the collectors (``totals``, ``timelines``,
``report_tables``, ``link_verdicts``) are the only place the job brings rows to the
driver for the page.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from georep import limits
from georep.spark_reconcile.columns import PLACE
from georep.spark_reconcile.inputs import CheckedExports
from georep.spark_reconcile.observed import Observed


def timeline_counts(events: DataFrame, bounds: DataFrame, series: str) -> DataFrame:
    """(topic, bucket, series, messages) for ``events`` (with topic and publish_time),
    bucketed along each topic's [first, last] publish time in ``bounds``."""
    buckets = limits.reconcile_timeline_buckets_max
    span = F.col("last_ms") - F.col("first_ms") + 1
    bucket = F.least(
        F.lit(buckets - 1),
        F.floor((F.col("publish_ms") - F.col("first_ms")) * buckets / span).cast("int"),
    )
    return (
        events.select("topic", (F.unix_millis("publish_time")).alias("publish_ms"))
        .join(F.broadcast(bounds), on="topic")
        .select("topic", bucket.alias("bucket"))
        .groupBy("topic", "bucket")
        .agg(F.count(F.lit(1)).alias("messages"))
        .withColumn("series", F.lit(series))
    )


def timeline_bounds(index: DataFrame) -> DataFrame:
    """Per topic, first and last publish time (ms) of the messages published on it.
    ``index``: :func:`message_index`."""
    return (
        index.where(F.col("cluster") == F.col("origin_cluster"))
        .groupBy("topic")
        .agg(F.min("first_ms").alias("first_ms"), F.max("last_ms").alias("last_ms"))
    )


def link_totals(link_summary_table: DataFrame, subscription_summary_table: DataFrame) -> DataFrame:
    """Per (origin, replica) over every topic: published on the origin, missing on the
    replica, stored twice there, undecodable there, acknowledged on the origin,
    redelivery and skip risk:
    one row per link pair, the figures of the page's verdict."""
    pair = ["origin_cluster", "replica_cluster"]
    stored = link_summary_table.groupBy(*pair).agg(
        F.sum("origin_messages").alias("published"),
        F.sum("gap_messages").alias("replication_gap"),
        F.sum("duplicate_copies").alias("duplicate_copies"),
        F.sum("undecodable_copies").alias("undecodable_copies"),
    )
    acked = subscription_summary_table.groupBy(*pair).agg(
        F.sum("acked_on_origin").alias("acked_on_origin"),
        F.sum("redelivery_risk").alias("redelivery_risk"),
        F.sum("skip_risk").alias("skip_risk"),
        F.count(F.lit(1)).alias("subscriptions"),
    )
    return stored.join(acked, on=pair, how="left").fillna(
        0, subset=["acked_on_origin", "redelivery_risk", "skip_risk", "subscriptions"]
    )


def worst_subscriptions(subscription_summary_table: DataFrame) -> DataFrame:
    """Per (origin, replica), its subscription with the most risk (redelivery plus skip;
    ties by topic, partition, name), with its three mark-delete positions as ``L:E``."""
    pair = ["origin_cluster", "replica_cluster"]
    risk = F.col("redelivery_risk") + F.col("skip_risk")
    rank = Window.partitionBy(*pair).orderBy(risk.desc(), *PLACE, "subscription")
    return (
        subscription_summary_table.withColumn("rank", F.row_number().over(rank))
        .where(F.col("rank") == 1)
        .select(
            *pair, "topic", "partition", "subscription",
            F.concat_ws(":", "origin_mdp_ledger_id", "origin_mdp_entry_id").alias("origin_mdp"),
            F.concat_ws(":", "translated_mdp_ledger_id", "translated_mdp_entry_id")
            .alias("translated_mdp"),
            F.concat_ws(":", "replica_mdp_ledger_id", "replica_mdp_entry_id")
            .alias("replica_mdp"),
        )
    )  # fmt: skip


def link_verdicts(links_table: DataFrame, subscriptions_table: DataFrame) -> list[dict[str, Any]]:
    """Per link pair, its totals and its subscription most at risk (small: one row per
    pair of clusters)."""
    worst = {
        (row.origin_cluster, row.replica_cluster): row.asDict()
        for row in worst_subscriptions(subscriptions_table).collect()
    }
    verdicts = []
    for row in (
        link_totals(links_table, subscriptions_table)
        .orderBy("origin_cluster", "replica_cluster")
        .collect()
    ):
        link = row.asDict()
        link["worst"] = worst.get((row.origin_cluster, row.replica_cluster))
        verdicts.append(link)
    return verdicts


def totals(
    checked: CheckedExports,
    index: DataFrame,
    links_table: DataFrame,
    subscriptions_table: DataFrame,
    observed: Observed | None,
    differences: DataFrame,
    subscriptions: DataFrame,
) -> dict[str, Any]:
    """Every total in one Spark job: each table's single-row aggregate turned into
    (name, value) rows, all in one union (side by side, joined, each aggregate would be
    a broadcast and a job of its own)."""
    parts = [
        index.agg(
            F.countDistinct("cluster").alias("clusters"),
            F.countDistinct("topic").alias("topics"),
        ),
        links_table.agg(
            F.count(F.lit(1)).alias("links"),
            F.sum("gap_messages").alias("replication_gap"),
            F.sum("duplicate_copies").alias("duplicate_copies"),
            F.sum("unmapped_copies").alias("unmapped_copies"),
            F.sum("undecodable_copies").alias("undecodable_copies"),
        ),
        subscriptions_table.agg(
            F.countDistinct("topic", "partition", "subscription").alias("subscriptions"),
            F.sum("acked_on_origin").alias("acked_on_origin"),
            F.sum("redelivery_risk").alias("redelivery_risk"),
            F.sum("skip_risk").alias("skip_risk"),
        ),
        subscriptions.agg(F.sum(F.size("batch_acks")).alias("batch_entries_partly_acked")),
        differences.agg(F.count(F.lit(1)).alias("batch_entries_differing")),
    ]
    if observed is not None:
        parts.append(observed.duplicates.agg(F.count(F.lit(1)).alias("observed_duplicates")))
        parts.append(observed.redeliveries.agg(F.count(F.lit(1)).alias("observed_redeliveries")))
        parts.append(observed.losses.agg(F.count(F.lit(1)).alias("observed_losses")))
    names = [name for part in parts for name in part.columns]
    pairs = [_as_pairs(part) for part in parts]
    combined = pairs[0]
    for more in pairs[1:]:
        combined = combined.unionByName(more)
    values = {row.name: row.value for row in combined.collect()}  # a row per total
    totals = {"messages": checked.rows["messages"], **{name: values[name] for name in names}}
    return {k: int(v or 0) for k, v in totals.items()}


def _as_pairs(single_row: DataFrame) -> DataFrame:
    """(name, value) for each column of a single-row aggregate of whole numbers."""
    return single_row.select(
        F.explode(
            F.array(*[F.struct(F.lit(name).alias("name"), F.col(name).cast("long").alias("value"))
                      for name in single_row.columns])
        ).alias("pair")
    ).select("pair.name", "pair.value")  # fmt: skip


def timelines(
    index: DataFrame,
    local: DataFrame,
    gap: DataFrame,
    risk: DataFrame,
    skips: DataFrame,
    observed: Observed | None,
    links_table: DataFrame,
    subs_table: DataFrame,
) -> dict[str, Any]:
    """Per chosen topic (most problems first, at most ``reconcile_report_topics_max``):
    counts per bucket of each series."""
    per_topic = (
        links_table.groupBy("topic")
        .agg(F.sum(F.col("gap_messages") + F.col("duplicate_copies")).alias("problems"))
        .unionByName(
            subs_table.groupBy("topic").agg(
                F.sum(F.col("redelivery_risk") + F.col("skip_risk")).alias("problems")
            )
        )
        .unionByName(
            index.where(F.col("cluster") == F.col("origin_cluster"))
            .select("topic", F.lit(0).cast("long").alias("problems"))
            .distinct()
        )
        .groupBy("topic")
        .agg(F.sum("problems").alias("problems"))
        .orderBy(F.desc("problems"), "topic")
        .limit(limits.reconcile_report_topics_max)
    )
    chosen = [row.topic for row in per_topic.collect()]
    if not chosen:
        return {}
    bounds = timeline_bounds(index.where(F.col("topic").isin(chosen))).persist()
    series = [
        timeline_counts(local, bounds, "published"),
        timeline_counts(gap, bounds, "replication_gap"),
        timeline_counts(risk, bounds, "redelivery_risk"),
        timeline_counts(skips, bounds, "skip_risk"),
    ]
    if observed is not None:
        series.append(
            timeline_counts(
                observed.duplicates.where(F.col("publish_time").isNotNull()),
                bounds,
                "observed_duplicates",
            )
        )
        series.append(timeline_counts(observed.losses, bounds, "observed_losses"))
    counts = series[0]
    for more in series[1:]:
        counts = counts.unionByName(more)
    buckets = limits.reconcile_timeline_buckets_max
    names = ["published", "replication_gap", "redelivery_risk", "skip_risk"]
    if observed is not None:
        names += ["observed_duplicates", "observed_losses"]
    timelines: dict[str, dict[str, Any]] = {}
    for row in bounds.collect():
        timelines[row.topic] = {
            "first_ms": row.first_ms,
            "last_ms": row.last_ms,
            "series": {name: [0] * buckets for name in names},
        }
    for row in counts.collect():  # at most topics x buckets x series rows
        timelines[row.topic]["series"][row.series][row.bucket] = row.messages
    bounds.unpersist()
    return {topic: timelines[topic] for topic in chosen if topic in timelines}


def report_tables(
    links_table: DataFrame,
    gaps: DataFrame,
    subs_table: DataFrame,
    observed: Observed | None,
    duplicates: DataFrame,
    differences: DataFrame,
) -> list[tuple[str, str, list[dict[str, Any]], int]]:
    rows_max = limits.reconcile_report_rows_max

    def rows(frame: DataFrame, order: list[Any]) -> tuple[list[dict[str, Any]], int]:
        """The first ``rows_max`` rows, and ``rows_max + 1`` when there are more."""
        shown = [row.asDict() for row in frame.orderBy(*order).limit(rows_max + 1).collect()]
        return shown[:rows_max], len(shown)

    tables = []
    link_rows, total = rows(
        links_table.select("gap_messages", "duplicate_copies", "unmapped_copies",
                           "undecodable_copies", "origin_messages", "copies",
                           "origin_cluster", "replica_cluster",
                           "topic", "gap_first_publish_time", "gap_last_publish_time"),
        [F.desc("gap_messages"), "topic", "origin_cluster", "replica_cluster"],
    )  # fmt: skip
    tables.append(("Replication links",
                   "Per topic and link: messages published on the origin, copies on the "
                   "replica, messages missing there (replication gap) with their publish-time "
                   "window, identities stored twice, copies whose origin position the export "
                   "could not find (not compared), copies whose schema is not their origin's "
                   "(undecodable as written).",
                   link_rows, total))  # fmt: skip
    gap_rows, total = rows(
        gaps.select("gap_messages", "origin_cluster", "replica_cluster", "topic", "partition",
                    "gap_first_publish_time", "gap_last_publish_time",
                    F.concat_ws(":", "gap_first_ledger_id", "gap_first_entry_id")
                    .alias("first_origin_position"),
                    F.concat_ws(":", "gap_last_ledger_id", "gap_last_entry_id")
                    .alias("last_origin_position")),
        [F.desc("gap_messages"), "topic", "partition"],
    )  # fmt: skip
    tables.append(("Replication gaps",
                   "Per topic partition: messages on the origin with no copy on the replica, "
                   "and the window of their publish times and origin positions.",
                   gap_rows, total))  # fmt: skip
    sub_rows, total = rows(
        subs_table.select(
            "redelivery_risk", "skip_risk", "acked_on_origin", "copies_acked_on_replica",
            "subscription", "origin_cluster", "replica_cluster",
            F.concat_ws(":", "origin_mdp_ledger_id", "origin_mdp_entry_id").alias("origin_mdp"),
            F.concat_ws(":", "translated_mdp_ledger_id", "translated_mdp_entry_id")
            .alias("translated_mdp"),
            F.concat_ws(":", "replica_mdp_ledger_id", "replica_mdp_entry_id")
            .alias("replica_mdp"),
            "replica_subscription_present", "topic", "partition"),
        [F.desc("redelivery_risk"), F.desc("skip_risk"), "topic", "partition", "subscription"],
    )  # fmt: skip
    tables.append(("Subscriptions",
                   "Per subscription and link: the origin's mark-delete position, where it "
                   "lands on the replica (translated: the copy of the last message it covers), "
                   "the replica's own; messages acknowledged on the origin, their copies "
                   "acknowledged on the replica; redelivery risk (acknowledged on the origin, "
                   "not on the replica: duplicates after failover) and skip risk (the reverse: "
                   "losses after failover).",
                   sub_rows, total))  # fmt: skip
    difference_rows, total = rows(
        differences.select(
            "topic", "partition", "subscription", "origin_cluster", "replica_cluster",
            F.concat_ws(":", "origin_ledger_id", "origin_entry_id").alias("origin_position"),
            F.concat_ws(":", "replica_ledger_id", "replica_entry_id").alias("replica_position"),
            "partly_on_origin", "partly_on_replica",
            F.array_join("origin_only_indexes", " ").alias("acked_on_origin_only"),
            F.array_join("replica_only_indexes", " ").alias("acked_on_replica_only")),
        [F.desc(F.size("origin_only_indexes") + F.size("replica_only_indexes")), "topic",
         "partition", "subscription", "origin_ledger_id", "origin_entry_id"],
    )  # fmt: skip
    tables.append(("Batches acknowledged differently",
                   "Per subscription and link: batch entries acknowledged only in part on at "
                   "least one side (batch-index acknowledgements), and the indexes within the "
                   "batch acknowledged on one side and not on the other: on the origin only "
                   "(delivered again after a failover) or on the replica only (skipped).",
                   difference_rows, total))  # fmt: skip
    duplicate_rows, total = rows(
        duplicates.select("replica_cluster", "topic", "partition", "origin_cluster",
                          "origin_ledger_id", "origin_entry_id", "batch_index", "copies"),
        [F.desc("copies"), "topic"],
    )  # fmt: skip
    tables.append(("Duplicate copies",
                   "Identities stored more than once on one replica.",
                   duplicate_rows, total))  # fmt: skip
    if observed is not None:
        kinds, total = rows(
            observed.duplicates.groupBy("topic", "subscription", "kind").agg(
                F.count(F.lit(1)).alias("messages"),
                F.sum(F.col("deliveries") - 1).alias("extra_deliveries"),
            ),
            [F.desc("messages"), "topic", "subscription"],
        )
        tables.append(("Observed duplicates",
                       "From the delivery log: messages delivered again after an acknowledged "
                       "delivery (consumed twice), by when (before the failover, after it, or "
                       "acknowledged before it and delivered again after it).",
                       kinds, total))  # fmt: skip
        kinds, total = rows(
            observed.redeliveries.groupBy("topic", "subscription", "kind").agg(
                F.count(F.lit(1)).alias("messages"),
                F.sum(F.col("deliveries") - 1).alias("extra_deliveries"),
            ),
            [F.desc("messages"), "topic", "subscription"],
        )
        tables.append(("Observed redeliveries",
                       "From the delivery log: messages delivered more than once but never "
                       "after an acknowledged delivery (negatively acknowledged, or delivered "
                       "unacknowledged before the failover and again after it): expected.",
                       kinds, total))  # fmt: skip
        causes, total = rows(
            observed.losses.groupBy("topic", "subscription", "cause").agg(
                F.count(F.lit(1)).alias("messages"),
                F.min("publish_time").alias("first_publish_time"),
                F.max("publish_time").alias("last_publish_time"),
            ),
            [F.desc("messages"), "topic", "subscription"],
        )
        tables.append(("Observed losses",
                       "From the delivery log: messages published on a topic a subscription "
                       "consumed that were neither acknowledged before the failover nor "
                       "delivered after it, and why (a replication gap, delivered but never "
                       "acknowledged, or never delivered).",
                       causes, total))  # fmt: skip
    return tables
