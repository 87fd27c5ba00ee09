"""The keys the reconciliation's transformations group and join by (``schema.py`` has the
input columns they come from), and which subscriptions are the system's own.

- ``IDENTITY``: a message's identity, the same on every cluster (origin cluster, origin
  ledger id, origin entry id, batch index);
- ``PLACE``: where it is published (topic, partition);
- ``SUBSCRIPTION_KEY``: one subscription of one cluster (cluster, topic, partition, name).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from georep.spark_reconcile.schema import SYSTEM_SUBSCRIPTION_PREFIXES

IDENTITY = ["origin_cluster", "origin_ledger_id", "origin_entry_id", "batch_index"]
PLACE = ["topic", "partition"]
SUBSCRIPTION_KEY = ["cluster", "topic", "partition", "subscription"]


def is_system_subscription(column: Column) -> Column:
    condition = F.lit(False)
    for prefix in SYSTEM_SUBSCRIPTION_PREFIXES:
        condition = condition | column.startswith(prefix)
    return condition
