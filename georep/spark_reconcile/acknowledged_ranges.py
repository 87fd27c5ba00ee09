"""Each message's acknowledgements: which subscriptions of its own cluster acknowledged it,
and through which range, found by a range join (no I/O, no UDFs, nothing collected).

**Acknowledged ranges as a range join.** A subscription acknowledges everything up to its
mark-delete position (MDP) and its individually deleted ranges ``(lower, upper]``. Both
are turned into *ranges* (the MDP is range -1: ``((-1, -1), MDP]``); each range is cut
into *pieces*, one per ledger it covers (clamped to the entries that ledger holds in the
index) and per bucket of ``limits.reconcile_range_bucket_entries`` entry ids. A message
then joins the pieces of its own (cluster, topic, partition, ledger, bucket) and tests
``first_entry <= entry_id <= last_entry``. Worked example with buckets of 1024: range
``(5:100..7:10]`` over ledgers 5 (entries 0..3000), 6 (0..99) and 7 (0..500) gives pieces
5:[101..3000] in buckets 0, 1, 2; 6:[0..99] in bucket 0; 7:[0..10] in bucket 0 — six rows
however many entries the range covers, where exploding it would give 3010. A message
compares itself with at most the pieces of one bucket, so no pair count blows up either.
Pieces are few (at most ranges + entries / bucket): they are grouped per (cluster,
topic, partition, ledger, bucket) into one array of candidates and broadcast when under
``limits.reconcile_broadcast_pieces_max``, so each message meets its candidates by an
equi-join without being shuffled, and keeps those whose bounds hold its entry: its
``acks``, the (subscription ``s``, range ``r``) pairs of its own cluster that acknowledged
it, each one long (:func:`ack_code`).

**Batch indexes.** Acknowledgements are per message: a batch entry acknowledged only in
part (``batch_acks``: entry 3:8, acknowledged indexes [0, 2]) becomes one more range,
``(3:7..3:8]``, that holds only those indexes (``batch_indexes``); the MDP and the
individually deleted ranges hold every index of their entries (``batch_indexes`` null). A
message of 3:8 then meets that piece and is acknowledged when its own ``batch_index`` is
listed: (A, 3, 8, 0) and (A, 3, 8, 2) are, (A, 3, 8, 1) is not. Range ids: -1 the MDP,
0..n-1 the n individually deleted ranges, n.. the partly acknowledged batches
(``range_kind`` says which).

Ranges of one cursor are disjoint and above its MDP (the export drops a batch entry a
range holds whole), so a message meets at most one piece per subscription.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from georep import limits
from georep.spark_reconcile.columns import PLACE, SUBSCRIPTION_KEY, is_system_subscription

MDP_RANGE_ID = -1

_BUCKET_BITS = limits.reconcile_range_bucket_entries.bit_length() - 1


def subscription_ids(subscriptions: DataFrame) -> DataFrame:
    """(subscription, sub_id): a number per subscription name, the same on every
    cluster, so that an acknowledgement is one long (:func:`ack_code`)."""
    from pyspark.sql import Window

    names = subscriptions.select("subscription").distinct()
    return names.select(
        "subscription",
        (F.dense_rank().over(Window.orderBy("subscription")) - 1).cast("int").alias("sub_id"),
    )


def ack_code(sub_id: Column, range_id: Column) -> Column:
    """One acknowledgement as a long: subscription number above, range id + 1 below.
    Arrays of longs cost far less to cache and scan than arrays of (name, range) pairs."""
    return F.shiftleft(sub_id.cast("long"), 32) + (range_id + 1).cast("long")


def ack_subscription(code: Column) -> Column:
    return F.shiftright(code, 32).cast("int")


def ack_range(code: Column) -> Column:
    return (code.bitwiseAND(F.lit(0xFFFFFFFF)) - 1).cast("int")


def acknowledged_ranges(subscriptions: DataFrame) -> DataFrame:
    """Every subscription's MDP (range -1), individually deleted ranges and partly
    acknowledged batch entries, each as ``(lower, upper]`` with a ``range_id``, a
    ``range_kind`` and the ``batch_indexes`` it holds (null: all)."""
    every_index = F.lit(None).cast("array<int>")
    mark_delete = subscriptions.select(
        *SUBSCRIPTION_KEY,
        F.lit(MDP_RANGE_ID).alias("range_id"),
        F.lit("mark_delete").alias("range_kind"),
        F.lit(-1).cast("long").alias("lower_ledger_id"),
        F.lit(-1).cast("long").alias("lower_entry_id"),
        F.col("mark_delete_ledger_id").alias("upper_ledger_id"),
        F.col("mark_delete_entry_id").alias("upper_entry_id"),
        every_index.alias("batch_indexes"),
    )
    individual = subscriptions.select(
        *SUBSCRIPTION_KEY, F.posexplode("individually_deleted").alias("range_id", "range")
    ).select(
        *SUBSCRIPTION_KEY,
        "range_id",
        F.lit("range").alias("range_kind"),
        F.col("range.lower_ledger_id").alias("lower_ledger_id"),
        F.col("range.lower_entry_id").alias("lower_entry_id"),
        F.col("range.upper_ledger_id").alias("upper_ledger_id"),
        F.col("range.upper_entry_id").alias("upper_entry_id"),
        every_index.alias("batch_indexes"),
    )
    batches = subscriptions.select(
        *SUBSCRIPTION_KEY,
        F.size("individually_deleted").alias("ranges"),
        F.posexplode("batch_acks").alias("i", "batch"),
    ).select(
        *SUBSCRIPTION_KEY,
        (F.col("ranges") + F.col("i")).alias("range_id"),
        F.lit("batch").alias("range_kind"),
        F.col("batch.ledger_id").alias("lower_ledger_id"),
        (F.col("batch.entry_id") - 1).alias("lower_entry_id"),
        F.col("batch.ledger_id").alias("upper_ledger_id"),
        F.col("batch.entry_id").alias("upper_entry_id"),
        F.col("batch.acked_indexes").alias("batch_indexes"),
    )
    return mark_delete.unionByName(individual).unionByName(batches)


def range_pieces(ranges: DataFrame, ledger_entries: DataFrame) -> DataFrame:
    """Each range cut per ledger and bucket (see the module docstring)."""
    joined = ranges.join(ledger_entries, on=["cluster", *PLACE]).where(
        F.col("ledger_id").between(F.col("lower_ledger_id"), F.col("upper_ledger_id"))
    )
    first = F.when(
        F.col("ledger_id") == F.col("lower_ledger_id"),
        F.greatest(F.col("lower_entry_id") + 1, F.col("ledger_first_entry")),
    ).otherwise(F.col("ledger_first_entry"))
    last = F.when(
        F.col("ledger_id") == F.col("upper_ledger_id"),
        F.least(F.col("upper_entry_id"), F.col("ledger_last_entry")),
    ).otherwise(F.col("ledger_last_entry"))
    pieces = (
        joined.select(*SUBSCRIPTION_KEY, "range_id", "ledger_id",
                      first.alias("first_entry"), last.alias("last_entry"), "batch_indexes")
        .where(F.col("first_entry") <= F.col("last_entry"))
    )  # fmt: skip
    return pieces.select(
        "*",
        F.explode(
            F.sequence(
                F.shiftright("first_entry", _BUCKET_BITS), F.shiftright("last_entry", _BUCKET_BITS)
            )
        ).alias("bucket"),
    )


def acknowledgements(
    messages: DataFrame, pieces: DataFrame, ids: DataFrame, *, broadcast: bool
) -> DataFrame:
    """Every message whose identity is known, with ``acks``: the (non-system)
    subscriptions of its own cluster that acknowledged it, and through which range, as
    :func:`ack_code` longs."""
    candidates = (
        pieces.where(~is_system_subscription(F.col("subscription")))
        .join(F.broadcast(ids), on="subscription")
        .groupBy("cluster", *PLACE, "ledger_id", "bucket")
        .agg(
            F.collect_list(
                F.struct("first_entry", "last_entry", F.col("batch_indexes").alias("b"),
                         ack_code(F.col("sub_id"), F.col("range_id")).alias("a"))
            ).alias("candidates")
        )
    )  # fmt: skip
    right = F.broadcast(candidates) if broadcast else candidates
    holding = F.filter(
        F.coalesce("candidates", F.array().cast(candidates.schema["candidates"].dataType)),
        lambda c: (
            F.col("entry_id").between(c["first_entry"], c["last_entry"])
            & (c["b"].isNull() | F.array_contains(c["b"], F.col("batch_index")))
        ),
    )
    return (
        messages.where(F.col("origin_ledger_id").isNotNull())
        .withColumn("bucket", F.shiftright("entry_id", _BUCKET_BITS))
        .join(right, on=["cluster", *PLACE, "ledger_id", "bucket"], how="left")
        .withColumn("acks", F.transform(holding, lambda c: c["a"]))
        .drop("candidates", "bucket")
    )  # fmt: skip
