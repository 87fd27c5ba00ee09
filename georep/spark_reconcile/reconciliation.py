"""The reconciliation as DataFrame transformations (no I/O, no UDFs, nothing collected).

Vocabulary (``schema.py`` has the input columns):

- a **local** message is one published on the cluster that exported it
  (``cluster == origin_cluster``); a **copy** is one replicated into it from elsewhere;
- a **link** (topic, origin cluster O, replica cluster R) exists when R holds at least one
  copy of a message O published on that topic. Only links are compared: a cluster that
  does not replicate a topic is not "missing" its messages;
- a **position** is (ledger id, entry id); the **identity** of a message is (origin
  cluster, origin ledger id, origin entry id, batch index), the same on every cluster.

**One shuffle.** The origin's messages, with their acknowledgements
(``acknowledged_ranges.py``) and once per replica of their topic, are joined
with the replicas' copies on (replica, topic, partition, identity) — as numbers: the
names become a lane number first (:func:`link_lanes`) — the only shuffle of the messages
(:func:`linked`). Every result is read off the joined rows (cached) by narrow
transformations and broadcast joins with small tables. Example, identity (A, 1, 4, -1)
acknowledged on A by ``s`` through its range 0, copied to B at 5:4, unacknowledged there::

    origin_acks=[(s, 0)]  replica B  replica_position=5:4  replica_acks=[]
    -> one redelivery-risk row (s, A→B, 1:4 → 5:4); no gap; no skip.

**Every count from small tables.** One narrow aggregation (:func:`message_index`, a row
per ledger and origin) gives the messages published and copied per link, the ledgers'
entry bounds the pieces need and the timelines' time bounds; duplicates come from a
hash-count of the copies (:func:`duplicate_copies`); the subscription summary is summed
from ``translated_positions``. The Parquet messages are scanned a fixed number of times
(the index, the duplicates' two steps, each side of the join, the published series of
the timelines), never once per question, and acknowledgements are looked up once.

Beside it: ``columns.py`` (the keys every transformation groups by),
``acknowledged_ranges.py`` (each message's acknowledgements, by a range join),
``observed.py`` (what a drill's delivery log shows happened) and ``page_figures.py``
(the small aggregates the page is built from, collected).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from georep.spark_reconcile.acknowledged_ranges import MDP_RANGE_ID, ack_range, ack_subscription
from georep.spark_reconcile.columns import IDENTITY, PLACE, is_system_subscription


def message_index(messages: DataFrame) -> DataFrame:
    """One narrow pass over the messages, grouped per (cluster, origin_cluster, topic,
    partition, ledger): the first and last entry id, messages, copies whose origin
    position is unknown (``unmapped``), first and last publish time (ms). Small (a row per
    ledger and origin), it answers every count the report needs without another pass."""
    return messages.groupBy("cluster", "origin_cluster", *PLACE, "ledger_id").agg(
        F.min("entry_id").alias("ledger_first_entry"),
        F.max("entry_id").alias("ledger_last_entry"),
        F.count(F.lit(1)).alias("messages"),
        F.sum(F.col("origin_ledger_id").isNull().cast("long")).alias("unmapped"),
        F.min(F.unix_millis("publish_time")).alias("first_ms"),
        F.max(F.unix_millis("publish_time")).alias("last_ms"),
    )


def unmapped_copies(index: DataFrame) -> DataFrame:
    """Copies whose origin position the export could not see, counted per topic."""
    return (
        index.where(F.col("unmapped") > 0)
        .groupBy(F.col("cluster").alias("replica_cluster"), "topic", "origin_cluster")
        .agg(F.sum("unmapped").alias("unmapped_copies"))
    )


def links(index: DataFrame, declared: DataFrame | None = None) -> DataFrame:
    """(topic, origin_cluster, replica_cluster) for every pair with at least one copy, and
    for every topic published on the origin of a ``declared`` (origin_cluster,
    replica_cluster) pair: a link that was cut before anything crossed it shows as a gap
    only when declared. ``index``: :func:`message_index`."""
    found = index.where(F.col("cluster") != F.col("origin_cluster")).select(
        "topic", "origin_cluster", F.col("cluster").alias("replica_cluster")
    )
    if declared is not None:
        published_topics = (
            index.where(F.col("cluster") == F.col("origin_cluster"))
            .select("topic", "origin_cluster")
            .distinct()
        )
        found = found.unionByName(
            published_topics.join(F.broadcast(declared), on="origin_cluster").select(
                "topic", "origin_cluster", "replica_cluster"
            )
        )
    return found.distinct()


def ledgers(index: DataFrame) -> DataFrame:
    """The entries each ledger holds in the index: (cluster, topic, partition, ledger_id,
    first_entry, last_entry)."""
    return index.groupBy("cluster", *PLACE, "ledger_id").agg(
        F.min("ledger_first_entry").alias("ledger_first_entry"),
        F.max("ledger_last_entry").alias("ledger_last_entry"),
    )


def published(acked: DataFrame) -> DataFrame:
    """The messages each cluster published itself, with their origin's acks and schema."""
    return acked.where(F.col("cluster") == F.col("origin_cluster")).select(
        *PLACE, *IDENTITY, "publish_time", "key", F.col("acks").alias("origin_acks"),
        F.col("payload_schema").alias("origin_payload_schema"),
    )  # fmt: skip


def replica_copies(acked: DataFrame) -> DataFrame:
    """The copies each cluster holds of messages published elsewhere."""
    return acked.where(F.col("cluster") != F.col("origin_cluster")).select(
        F.col("cluster").alias("replica_cluster"),
        *PLACE,
        *IDENTITY,
        F.col("ledger_id").alias("replica_ledger_id"),
        F.col("entry_id").alias("replica_entry_id"),
        F.col("acks").alias("replica_acks"),
        F.col("payload_schema_version").alias("replica_schema_version"),
        F.col("payload_schema").alias("replica_payload_schema"),
    )


def link_lanes(index: DataFrame, link_rows: DataFrame) -> DataFrame:
    """(origin_cluster, topic, partition, replica_cluster, lane): a number for each topic
    partition published on an origin and each replica of its topic. Small; the join of
    :func:`linked` keys on it instead of on the four names."""
    from pyspark.sql import Window

    published = (
        index.where(F.col("cluster") == F.col("origin_cluster"))
        .select("origin_cluster", *PLACE)
        .distinct()
    )
    columns = ["origin_cluster", *PLACE, "replica_cluster"]
    return (
        published.join(link_rows, on=["topic", "origin_cluster"])
        .select(*columns)
        .withColumn("lane", (F.dense_rank().over(Window.orderBy(*columns)) - 1).cast("int"))
    )


def linked(
    origin_rows: DataFrame,
    copy_rows: DataFrame,
    lanes: DataFrame,
    duplicates: DataFrame,
    *,
    broadcast_copies: bool,
) -> DataFrame:
    """Each published message once per replica of its topic, with its copy there (null
    replica position: none; two rows: stored twice). ``counted`` is false on the second
    and later copies of an identity stored twice (``duplicates``), so that summing it
    counts messages, not copies.

    Origins and copies are matched on (lane, origin ledger, entry, batch index), numbers
    only: the names (origin, topic, partition, replica) are replaced by their
    :func:`link_lanes` number before the match and put back by :func:`named` after it,
    so the one shuffle of the messages moves, sorts and compares no strings. With
    ``broadcast_copies`` the copies become one in-memory hash table instead (no shuffle);
    without, both sides are shuffled and merged, which scales past memory."""
    names = ["origin_cluster", *PLACE, "replica_cluster"]
    key = ["lane", "origin_ledger_id", "origin_entry_id", "batch_index"]
    origins = origin_rows.join(F.broadcast(lanes), on=["origin_cluster", *PLACE]).drop(*names)
    copies = copy_rows.join(F.broadcast(lanes), on=names).drop(*names)
    first_copies = duplicates.join(F.broadcast(lanes), on=names).select(
        *key, F.col("positions")[0]["l"].alias("first_l"),
        F.col("positions")[0]["e"].alias("first_e"),
    )  # fmt: skip
    counted = F.col("first_l").isNull() | (
        (F.col("replica_ledger_id") == F.col("first_l"))
        & (F.col("replica_entry_id") == F.col("first_e"))
    )
    right = F.broadcast(copies) if broadcast_copies else copies.hint("merge")
    return (
        origins.join(right, on=key, how="left")
        .join(F.broadcast(first_copies), on=key, how="left")
        .withColumn("counted", counted)
        .drop("first_l", "first_e")
    )


def named(rows: DataFrame, lanes: DataFrame) -> DataFrame:
    """``rows`` with their lane numbers replaced by the names (see :func:`linked`)."""
    return rows.join(F.broadcast(lanes), on="lane").drop("lane")


def subscription_presence(subscriptions: DataFrame, side: str) -> DataFrame:
    """(``side``_cluster, topic, partition, subscription) of the non-system subscriptions,
    with ``side``_subscription_present = true."""
    return subscriptions.where(~is_system_subscription(F.col("subscription"))).select(
        F.col("cluster").alias(f"{side}_cluster"),
        *PLACE,
        "subscription",
        F.lit(True).alias(f"{side}_subscription_present"),
    )


def acked_translation(
    linked_rows: DataFrame, subscriptions: DataFrame, ids: DataFrame
) -> DataFrame:
    """For every published message acknowledged on its origin by a subscription, and every
    replica of its topic: the copy's replica position (null: no copy), whether the same
    subscription acknowledged the copy there, and whether it exists there at all."""
    exploded = linked_rows.select("*", F.explode("origin_acks").alias("ack"))
    sub_id = ack_subscription(F.col("ack"))
    acked_here = F.coalesce(
        F.exists("replica_acks", lambda a: ack_subscription(a) == sub_id), F.lit(False)
    )
    return (
        exploded.select(
            *PLACE, sub_id.alias("sub_id"), "origin_cluster", "replica_cluster",
            ack_range(F.col("ack")).alias("range_id"), "origin_ledger_id", "origin_entry_id",
            "batch_index", "publish_time", "replica_ledger_id", "replica_entry_id", "counted",
            acked_here.alias("acked_on_replica"),
        )
        .join(F.broadcast(ids), on="sub_id")
        .drop("sub_id")
        .join(
            F.broadcast(subscription_presence(subscriptions, "replica")),
            on=["replica_cluster", *PLACE, "subscription"],
            how="left",
        )
        .withColumn(
            "replica_subscription_present",
            F.coalesce("replica_subscription_present", F.lit(False)),
        )
    )  # fmt: skip


def redelivery_risk(translation: DataFrame) -> DataFrame:
    """Copies of messages the origin acknowledged that the replica's subscription has not:
    a consumer failing over to the replica gets them again (would-be duplicates)."""
    return translation.where(
        F.col("replica_ledger_id").isNotNull()
        & ~F.col("acked_on_replica")
        & F.col("replica_subscription_present")
    ).drop("acked_on_replica", "replica_subscription_present", "counted")


def _position(ledger: str, entry: str) -> Column:
    return F.when(
        F.col(ledger).isNotNull(), F.struct(F.col(ledger).alias("l"), F.col(entry).alias("e"))
    )


def _flatten(frame: DataFrame, struct_column: str, prefix: str) -> DataFrame:
    return (
        frame.withColumn(f"{prefix}_ledger_id", F.col(f"{struct_column}.l"))
        .withColumn(f"{prefix}_entry_id", F.col(f"{struct_column}.e"))
        .drop(struct_column)
    )


def translated_positions(translation: DataFrame, ranges: DataFrame) -> DataFrame:
    """Per origin range (range -1 is the MDP): where the copies of its messages lie on each
    replica, and how many of them the replica's subscription acknowledged."""
    grouped = translation.groupBy(
        *PLACE, "subscription", "origin_cluster", "replica_cluster", "range_id"
    ).agg(
        F.sum(F.col("counted").cast("long")).alias("origin_messages"),
        F.count("replica_ledger_id").alias("copies"),
        F.sum(F.col("acked_on_replica").cast("long")).alias("copies_acked_on_replica"),
        F.min(_position("origin_ledger_id", "origin_entry_id")).alias("origin_first"),
        F.max(_position("origin_ledger_id", "origin_entry_id")).alias("origin_last"),
        F.min(_position("replica_ledger_id", "replica_entry_id")).alias("replica_first"),
        F.max(_position("replica_ledger_id", "replica_entry_id")).alias("replica_last"),
        F.max("replica_subscription_present").alias("replica_subscription_present"),
    )
    for column in ("origin_first", "origin_last", "replica_first", "replica_last"):
        grouped = _flatten(grouped, column, column)
    bounds = ranges.select(
        F.col("cluster").alias("origin_cluster"), *PLACE, "subscription", "range_id",
        "range_kind", F.col("batch_indexes").alias("origin_batch_indexes"),
        F.col("lower_ledger_id").alias("origin_lower_ledger_id"),
        F.col("lower_entry_id").alias("origin_lower_entry_id"),
        F.col("upper_ledger_id").alias("origin_upper_ledger_id"),
        F.col("upper_entry_id").alias("origin_upper_entry_id"),
    )  # fmt: skip
    return grouped.join(
        F.broadcast(bounds), on=["origin_cluster", *PLACE, "subscription", "range_id"], how="left"
    ).withColumn("copies_not_acked_on_replica", F.col("copies") - F.col("copies_acked_on_replica"))


def skip_risk(linked_rows: DataFrame, subscriptions: DataFrame, ids: DataFrame) -> DataFrame:
    """Copies the replica's subscription acknowledged whose original the origin still
    holds unacknowledged by the same subscription (which exists there): a consumer
    failing over would skip them (would-be losses)."""
    exploded = linked_rows.where(F.col("replica_ledger_id").isNotNull()).select(
        "*", F.explode("replica_acks").alias("ack")
    )
    sub_id = ack_subscription(F.col("ack"))
    acked_on_origin = F.exists("origin_acks", lambda a: ack_subscription(a) == sub_id)
    return (
        exploded.where(~acked_on_origin)
        .select(
            *PLACE, sub_id.alias("sub_id"), "origin_cluster", "replica_cluster",
            "origin_ledger_id", "origin_entry_id", "batch_index", "publish_time",
            "replica_ledger_id", "replica_entry_id",
        )
        .join(F.broadcast(ids), on="sub_id")
        .drop("sub_id")
        .join(
            F.broadcast(subscription_presence(subscriptions, "origin")),
            on=["origin_cluster", *PLACE, "subscription"],
        )
        .drop("origin_subscription_present")
    )  # fmt: skip


def batch_differences(risk: DataFrame, skips: DataFrame, subscriptions: DataFrame) -> DataFrame:
    """Per subscription, link and batch entry acknowledged only in part on at least one
    side (its origin entry in the origin's ``batch_acks``, or its copy's entry in the
    replica's): the indexes acknowledged on the origin and not on the replica
    (``origin_only_indexes``, the redelivery risk) and the reverse (``replica_only_indexes``,
    the skip risk). Example: A acknowledged indexes [0, 2] of a batch of 4 at 1:4, B [2, 3]
    of its copy at 5:4 -> origin_only [0], replica_only [3]."""
    key = [
        *PLACE, "subscription", "origin_cluster", "replica_cluster",
        "origin_ledger_id", "origin_entry_id", "replica_ledger_id", "replica_entry_id",
    ]  # fmt: skip
    index, none = F.col("batch_index"), F.lit(None).cast("int")
    differing = (
        risk.where(index >= 0)
        .select(*key, index.alias("origin_only"), none.alias("replica_only"))
        .unionByName(
            skips.where(index >= 0).select(*key, none.alias("origin_only"),
                                           index.alias("replica_only"))
        )
    )  # fmt: skip
    partial = subscriptions.select(
        "cluster", *PLACE, "subscription", F.explode("batch_acks").alias("batch")
    ).select("cluster", *PLACE, "subscription", F.col("batch.ledger_id").alias("ledger_id"),
             F.col("batch.entry_id").alias("entry_id"), F.lit(True).alias("partly"))  # fmt: skip

    def partly_on(side: str) -> DataFrame:
        return partial.select(
            F.col("cluster").alias(f"{side}_cluster"), *PLACE, "subscription",
            F.col("ledger_id").alias(f"{side}_ledger_id"),
            F.col("entry_id").alias(f"{side}_entry_id"), F.col("partly").alias(f"{side}_partly"),
        )  # fmt: skip

    grouped = differing.groupBy(*key).agg(
        F.array_sort(F.collect_list("origin_only")).alias("origin_only_indexes"),
        F.array_sort(F.collect_list("replica_only")).alias("replica_only_indexes"),
    )
    side_key = [*PLACE, "subscription"]
    return (
        grouped.join(F.broadcast(partly_on("origin")),
                     on=["origin_cluster", *side_key, "origin_ledger_id", "origin_entry_id"],
                     how="left")
        .join(F.broadcast(partly_on("replica")),
              on=["replica_cluster", *side_key, "replica_ledger_id", "replica_entry_id"],
              how="left")
        .where(F.col("origin_partly").isNotNull() | F.col("replica_partly").isNotNull())
        .select(*key, F.coalesce("origin_partly", F.lit(False)).alias("partly_on_origin"),
                F.coalesce("replica_partly", F.lit(False)).alias("partly_on_replica"),
                "origin_only_indexes", "replica_only_indexes")
    )  # fmt: skip


def replication_gap(linked_rows: DataFrame) -> DataFrame:
    """Messages published on an origin with no copy on a replica of their topic."""
    return linked_rows.where(F.col("replica_ledger_id").isNull()).select(
        *PLACE, *IDENTITY, "key", "publish_time", "replica_cluster"
    )


def undecodable_copies(linked_rows: DataFrame) -> DataFrame:
    """Copies that do not decode as their origin was written: the origin's schema is
    known (``origin_payload_schema``) and the copy names no version, a version its
    cluster holds no schema under, or one whose schema is another (schema.py, "Payload
    schemas"). Worked example: A stamped a message with its v1, ``AVRO:3f0c…``; B holds
    that schema as its v0. A copy stamped 0 is sound; one stamped 1 names B's v1, say
    ``AVRO:9a1e…``: undecodable as written. Messages with no schema on their origin (or
    whose origin no longer holds it) are not judged."""
    origin = F.col("origin_payload_schema")
    return linked_rows.where(
        F.col("replica_ledger_id").isNotNull()
        & origin.isNotNull()
        & ~F.col("replica_payload_schema").eqNullSafe(origin)
    ).select(
        *PLACE, *IDENTITY, "replica_cluster", "replica_ledger_id", "replica_entry_id",
        "replica_schema_version", "replica_payload_schema", "origin_payload_schema",
    )  # fmt: skip


def gap_summary(gap: DataFrame) -> DataFrame:
    """Per topic partition and link: how many messages are missing, and when and where
    the missing stretch begins and ends on the origin."""
    grouped = gap.groupBy(*PLACE, "origin_cluster", "replica_cluster").agg(
        F.count(F.lit(1)).alias("gap_messages"),
        F.min("publish_time").alias("gap_first_publish_time"),
        F.max("publish_time").alias("gap_last_publish_time"),
        F.min(_position("origin_ledger_id", "origin_entry_id")).alias("first"),
        F.max(_position("origin_ledger_id", "origin_entry_id")).alias("last"),
    )
    return _flatten(_flatten(grouped, "first", "gap_first"), "last", "gap_last")


def duplicate_copies(messages: DataFrame) -> DataFrame:
    """Identities stored more than once on one replica (replication deduplication failed).

    Found in two steps: the copies' identities hashed to one long and counted (a narrow
    aggregation, no strings shuffled), then only the copies whose hash was seen twice
    grouped exactly — a hash collision costs a few rows there, never a wrong answer."""
    key = ["replica_cluster", *PLACE, *IDENTITY]
    copies = messages.where(
        (F.col("cluster") != F.col("origin_cluster")) & F.col("origin_ledger_id").isNotNull()
    ).select(
        F.col("cluster").alias("replica_cluster"), *PLACE, *IDENTITY,
        F.col("ledger_id").alias("replica_ledger_id"), F.col("entry_id").alias("replica_entry_id"),
        F.xxhash64(F.col("cluster"), *PLACE, *IDENTITY).alias("identity_hash"),
    )  # fmt: skip
    seen_twice = (
        copies.groupBy("identity_hash").agg(F.count(F.lit(1)).alias("n")).where(F.col("n") > 1)
    )
    return (
        copies.join(F.broadcast(seen_twice.select("identity_hash")), on="identity_hash")
        .groupBy(*key)
        .agg(
            F.count(F.lit(1)).alias("copies"),
            F.array_sort(F.collect_list(_position("replica_ledger_id", "replica_entry_id"))).alias(
                "positions"
            ),
        )
        .where(F.col("copies") > 1)
    )


def link_summary(
    index: DataFrame,
    link_rows: DataFrame,
    gaps: DataFrame,
    duplicates: DataFrame,
    unmapped: DataFrame,
    undecodable: DataFrame,
) -> DataFrame:
    """Per (topic, origin, replica): published, copied, missing (and when), duplicated,
    unmapped, undecodable (:func:`undecodable_copies`). ``index``: :func:`message_index`."""
    link_key = ["topic", "origin_cluster", "replica_cluster"]
    local = F.col("cluster") == F.col("origin_cluster")
    published_counts = (
        index.where(local).groupBy("topic", "origin_cluster")
        .agg(F.sum("messages").alias("origin_messages"))
    )  # fmt: skip
    copied = (
        index.where(~local)
        .groupBy("topic", "origin_cluster", F.col("cluster").alias("replica_cluster"))
        .agg(F.sum(F.col("messages") - F.col("unmapped")).alias("copies"))
    )
    missing = gaps.groupBy(*link_key).agg(
        F.sum("gap_messages").alias("gap_messages"),
        F.min("gap_first_publish_time").alias("gap_first_publish_time"),
        F.max("gap_last_publish_time").alias("gap_last_publish_time"),
    )
    doubled = duplicates.groupBy(*link_key).agg(
        F.sum(F.col("copies") - 1).alias("duplicate_copies")
    )
    garbled = undecodable.groupBy(*link_key).agg(F.count(F.lit(1)).alias("undecodable_copies"))
    return (
        link_rows.join(published_counts, on=["topic", "origin_cluster"], how="left")
        .join(copied, on=link_key, how="left")
        .join(missing, on=link_key, how="left")
        .join(doubled, on=link_key, how="left")
        .join(unmapped, on=link_key, how="left")
        .join(garbled, on=link_key, how="left")
        .fillna(0, subset=["origin_messages", "copies", "gap_messages", "duplicate_copies",
                           "unmapped_copies", "undecodable_copies"])
    )  # fmt: skip


def subscription_summary(
    positions: DataFrame,
    skips: DataFrame,
    subscriptions: DataFrame,
    link_rows: DataFrame,
) -> DataFrame:
    """Per (topic, partition, subscription, origin, replica): messages acknowledged on the
    origin, copies of them and how many the replica acknowledged, redelivery and skip
    risk (counted per copy: a message stored twice on the replica is delivered twice),
    and the MDPs: the origin's, its translation onto the replica (the last copy of a
    message below it) and the replica's own. Summed from ``positions``
    (:func:`translated_positions`, a row per acknowledged range), not from the messages."""
    key = [*PLACE, "subscription", "origin_cluster", "replica_cluster"]
    present = F.col("replica_subscription_present")
    acked = positions.groupBy(*key).agg(
        F.sum("origin_messages").alias("acked_on_origin"),
        F.sum("copies").alias("copies_of_acked_on_origin"),
        F.sum("copies_acked_on_replica").alias("copies_acked_on_replica"),
        F.sum(F.when(present, F.col("copies_not_acked_on_replica")).otherwise(0)).alias(
            "redelivery_risk"
        ),
        F.max(present).alias("replica_subscription_present"),
        F.max(
            F.when(
                F.col("range_id") == MDP_RANGE_ID,
                _position("replica_last_ledger_id", "replica_last_entry_id"),
            )
        ).alias("translated_mdp"),
    )
    skipped = skips.groupBy(*key).agg(F.count(F.lit(1)).alias("skip_risk"))
    mdp = subscriptions.select(
        *PLACE, "subscription", "cluster", "mark_delete_ledger_id", "mark_delete_entry_id"
    )
    origin_mdp = mdp.select(
        F.col("cluster").alias("origin_cluster"), *PLACE, "subscription",
        F.col("mark_delete_ledger_id").alias("origin_mdp_ledger_id"),
        F.col("mark_delete_entry_id").alias("origin_mdp_entry_id"),
    )  # fmt: skip
    replica_mdp = mdp.select(
        F.col("cluster").alias("replica_cluster"), *PLACE, "subscription",
        F.col("mark_delete_ledger_id").alias("replica_mdp_ledger_id"),
        F.col("mark_delete_entry_id").alias("replica_mdp_entry_id"),
    )  # fmt: skip
    pairs = subscription_presence(subscriptions, "origin").join(
        F.broadcast(link_rows), on=["topic", "origin_cluster"]
    )
    summary = (
        pairs.select(*key)
        .join(acked, on=key, how="left")
        .join(skipped, on=key, how="left")
        .join(F.broadcast(origin_mdp), on=["origin_cluster", *PLACE, "subscription"], how="left")
        .join(F.broadcast(replica_mdp), on=["replica_cluster", *PLACE, "subscription"],
              how="left")
        .fillna(0, subset=["acked_on_origin", "copies_of_acked_on_origin",
                           "copies_acked_on_replica", "redelivery_risk", "skip_risk"])
    )  # fmt: skip
    summary = _flatten(summary, "translated_mdp", "translated_mdp")
    return summary.withColumn(
        "replica_subscription_present", F.col("replica_mdp_ledger_id").isNotNull()
    ).withColumn(
        "replica_mdp_covers_translated",
        F.struct("replica_mdp_ledger_id", "replica_mdp_entry_id")
        >= F.struct("translated_mdp_ledger_id", "translated_mdp_entry_id"),
    )


def local_messages(messages: DataFrame) -> DataFrame:
    """The messages each cluster published itself (no acknowledgements looked up)."""
    return messages.where(F.col("cluster") == F.col("origin_cluster")).select(
        *PLACE, *IDENTITY, "publish_time", "key"
    )
