"""``georep reconcile``: the audit's Spark job (docs/AUDIT.md).

Run as ``georep reconcile --input A/ B/ [--deliveries LOG] --out OUT`` (Spark in local
mode, ``local[*]``, unless ``--master`` names another), or as
``spark-submit georep/spark_reconcile/job.py --input ... --out ...`` (the master and
resources are then spark-submit's). The Spark UI is off unless ``--ui``.

Steps: check the inputs' footers (``inputs.py``; bad input fails here, before Spark
starts), load them, run the transformations of ``reconciliation.py``, write each result
as a Parquet table under OUT (the small ones also as CSV under OUT/csv/), collect the
small aggregates (bounded by ``limits.reconcile_report_*``) into OUT/summary.json and
the page OUT/report.html.

Spark stays silent unless asked: no console progress bar, and when this command starts
the driver itself, ``log4j2.properties`` (beside this file) replaces Spark's default log
configuration at the level of ``--spark-log-level`` (off by default), so that its
startup lines never mix with the steps this command prints.

Tables written under OUT (every one a directory of Parquet files):

==========================  =============================================================
link_summary                per topic, origin and replica: published, copied, missing,
                            duplicated, unmapped and undecodable copies
replication_gap             each message of an origin with no copy on a replica
replication_gaps            per topic partition and link: gap size, first/last publish
                            time, first/last origin position
undecodable_copies          each copy whose schema is not its origin's (a version its
                            cluster lacks or holds another schema under): undecodable
                            as written
translated_positions        per subscription and origin range (-1 = MDP): where the
                            copies of its messages lie on the replica, how many the
                            replica's subscription acknowledged
subscription_summary        per subscription and link: MDPs (origin, translated, replica),
                            acknowledged on origin, redelivery risk, skip risk
redelivery_risk             each copy acknowledged on the origin and not on the replica
skip_risk                   each copy acknowledged on the replica and not on the origin
batch_differences           per subscription, link and batch entry acknowledged in part on
                            either side: the indexes acknowledged on one side only
duplicate_copies            identities stored more than once on one replica
observed_duplicates         (with --deliveries) messages delivered again after an
                            acknowledged delivery: consumed twice
observed_redeliveries       (with --deliveries) messages delivered more than once, never
                            after an acknowledged delivery: expected redeliveries
observed_losses             (with --deliveries) messages neither acknowledged before the
                            failover nor delivered after it, with a cause
==========================  =============================================================

Exit status: 0 done, 2 bad input (one line on stderr saying what and where), 1 Spark
failed (its message's first lines on stderr). Never a stack trace for these.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if __name__ == "__main__" and not __package__:
    # Run by spark-submit as a script: this file's directory must not shadow top-level
    # modules (it holds schema.py, errors.py, ...), and georep must be importable.
    _here = Path(__file__).resolve()
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here.parent]
    sys.path.insert(0, str(_here.parents[2]))

from georep import limits
from georep.spark_reconcile.errors import ReconcileError
from georep.spark_reconcile.inputs import CheckedExports, check_exports

if TYPE_CHECKING:  # pyspark is the optional extra 'spark': imported where it runs
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, SparkSession

    from georep.spark_reconcile.reconciliation import Observed

SUBMIT_ENV = "PYSPARK_GATEWAY_PORT"  # set for the Python driver spark-submit starts


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input",
        required=True,
        nargs="+",
        metavar="DIR",
        help="export directories (`georep export --out`), one per cluster",
    )
    parser.add_argument(
        "--deliveries",
        default=None,
        metavar="FILE",
        help="a drill's delivery log: JSON lines or Parquet",
    )
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="DIR",
        help="output directory: Parquet tables, summary.json, report.html",
    )
    parser.add_argument(
        "--link",
        action="append",
        default=[],
        metavar="ORIGIN:REPLICA",
        help="a replication link to check even if nothing crossed it (repeatable); links "
        "with at least one copy are found by themselves",
    )
    parser.add_argument(
        "--master",
        default=None,
        metavar="URL",
        help="Spark master (default: local[*], or spark-submit's)",
    )
    parser.add_argument("--ui", action="store_true", help="serve the Spark UI while running")
    parser.add_argument(
        "--driver-memory-mib",
        type=int,
        default=limits.reconcile_driver_memory_mib_default,
        metavar="MIB",
        help="driver memory when this command starts Spark itself",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting (repeatable)",
    )
    parser.add_argument(
        "--spark-log-level",
        default="OFF",
        choices=["OFF", "FATAL", "ERROR", "WARN", "INFO"],
        help="Spark's own log level once started (default OFF: a failure is reported as "
        "one message, not as the JVM's stack traces)",
    )
    parser.add_argument(
        "--title",
        default=None,
        help="report title (default: the clusters compared and the time of the run)",
    )


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        import pyspark  # noqa: F401 - only to say what is missing before any work
    except ImportError:
        print(
            "georep reconcile: error: PySpark is not installed; install georep with the"
            " Spark extra (pip install 'georep[spark]') and Java 17+",
            file=sys.stderr,
        )
        return 2
    try:
        checked = check_exports(args.input)
        if args.deliveries and not Path(args.deliveries).exists():
            raise ReconcileError(f"deliveries {args.deliveries}: no such file")
        conf = _parse_conf(args.conf)
        declared = _parse_links(args.link)
        try:
            args.out.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ReconcileError(
                f"cannot create the output directory {args.out}: {error}"
            ) from None
        spark = start_spark(
            master=args.master,
            ui=args.ui,
            driver_memory_mib=args.driver_memory_mib,
            conf=conf,
            log_level=args.spark_log_level,
        )
        try:
            totals = reconcile(
                spark,
                checked,
                args.deliveries,
                args.out,
                title=args.title,
                links=declared,
                inputs_named=list(args.input),
            )
        finally:
            spark.stop()
    except ReconcileError as error:
        print(f"georep reconcile: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:
        if not _is_spark_error(error):
            raise
        print(f"georep reconcile: Spark failed: {_head(error)}", file=sys.stderr)
        return 1
    totals["wall_s"] = round(time.monotonic() - started, 3)
    print(json.dumps(totals, sort_keys=True))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="job.py", description=__doc__.splitlines()[0])
    configure(parser)
    return run(parser.parse_args(argv))


def _parse_conf(pairs: list[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise ReconcileError(f"--conf {pair!r} is not KEY=VALUE")
        conf[key.strip()] = value
    return conf


def _parse_links(pairs: list[str]) -> list[tuple[str, str]]:
    links = []
    for pair in pairs:
        origin, colon, replica = pair.partition(":")
        if not colon or not origin.strip() or not replica.strip() or origin == replica:
            raise ReconcileError(f"--link {pair!r} is not ORIGIN:REPLICA (two cluster names)")
        links.append((origin.strip(), replica.strip()))
    return links


def _is_spark_error(error: BaseException) -> bool:
    module = type(error).__module__ or ""
    return module.startswith(("pyspark", "py4j"))


def _head(error: BaseException, lines: int = 3) -> str:
    text = [line for line in str(error).strip().splitlines() if line.strip()]
    return " | ".join(text[:lines]) or type(error).__name__


def start_spark(
    *,
    master: str | None = None,
    ui: bool = False,
    driver_memory_mib: int = limits.reconcile_driver_memory_mib_default,
    conf: dict[str, str] | None = None,
    log_level: str = "ERROR",
) -> SparkSession:
    from pyspark.sql import SparkSession

    under_submit = SUBMIT_ENV in os.environ
    builder = SparkSession.builder.appName("georep-reconcile")
    if master:
        builder = builder.master(master)
    elif not under_submit:
        builder = builder.master("local[*]")
    settings = {
        "spark.ui.enabled": "true" if ui else "false",
        "spark.sql.session.timeZone": "UTC",
        # the stage bars would interleave with this command's own steps on stderr
        "spark.ui.showConsoleProgress": "false",
    }
    if not under_submit:
        settings["spark.driver.memory"] = f"{driver_memory_mib}m"
        settings["spark.sql.shuffle.partitions"] = str(limits.reconcile_shuffle_partitions_default)
        # the driver JVM starts with our log configuration: Spark's default one prints
        # its level and warnings before setLogLevel below could silence them
        settings["spark.driver.extraJavaOptions"] = (
            f"-Dlog4j2.configurationFile={Path(__file__).with_name('log4j2.properties')}"
            f" -Dgeorep.spark.log.level={log_level.lower()}"
        )
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    if log_level != "INFO":
        # py4j logs each connection it closes at INFO through Python's logging
        logging.getLogger("py4j").setLevel(logging.WARNING)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    context_conf = spark.sparkContext.getConf()
    if (spark.sparkContext.master or "").startswith("local") and not context_conf.contains(
        "spark.sql.shuffle.partitions"
    ):
        # spark-submit --master local[...] without a setting: 200 partitions of a few
        # rows each would cost more than the work
        spark.conf.set(
            "spark.sql.shuffle.partitions", str(limits.reconcile_shuffle_partitions_default)
        )
    return spark


class _Steps:
    """``reconcile: [n/total] what`` on stderr, one line per step; and each step's Spark
    jobs described as ``[n/total] what`` (the Spark UI, ``--ui``, and its event log show
    where the time goes)."""

    def __init__(self, total: int, quiet: bool, context: SparkContext | None = None) -> None:
        self.total, self.done, self.quiet = total, 0, quiet
        self.context = context
        self.started = time.monotonic()

    def begin(self, what: str) -> None:
        if self.context is not None:
            self.context.setJobDescription(f"[{self.done + 1}/{self.total}] {what}")

    def __call__(self, what: str) -> None:
        self.done += 1
        if not self.quiet:
            elapsed = time.monotonic() - self.started
            print(f"reconcile: [{self.done}/{self.total}] {what} ({elapsed:.1f} s)",
                  file=sys.stderr, flush=True)  # fmt: skip


def reconcile(
    spark: SparkSession,
    checked: CheckedExports,
    deliveries_path: str | None,
    out: Path,
    *,
    title: str | None = None,
    quiet: bool = False,
    links: list[tuple[str, str]] | None = None,
    inputs_named: list[str] | None = None,
) -> dict[str, Any]:
    """Run the reconciliation on ``spark``; write the tables, summary.json and
    report.html under ``out``; return the totals. ``title``: the page's (default: the
    clusters and the time); ``inputs_named``: the export directories as given, named on
    the page."""
    run_at = time.time()
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from georep.spark_reconcile import reconciliation as R
    from georep.spark_reconcile import report
    from georep.spark_reconcile.inputs import load

    keep = StorageLevel.MEMORY_AND_DISK
    step = _Steps(17 if deliveries_path else 14, quiet, spark.sparkContext)
    out.mkdir(parents=True, exist_ok=True)
    inputs = load(spark, checked, deliveries_path)
    step("inputs checked")

    messages = inputs.messages
    subscriptions = inputs.subscriptions.persist(keep)
    ids = R.subscription_ids(subscriptions).persist(keep)
    declared = (
        spark.createDataFrame(links, "origin_cluster string, replica_cluster string")
        if links
        else None
    )
    index = R.message_index(messages).persist(keep)
    link_rows = R.links(index, declared).persist(keep)
    ranges = R.acknowledged_ranges(subscriptions).persist(keep)
    pieces = R.range_pieces(ranges, R.ledgers(index)).persist(keep)
    step.begin("cut acknowledged ranges into pieces")
    piece_count = pieces.count()
    step(f"acknowledged ranges cut into {piece_count} pieces")

    def write(frame: DataFrame, name: str, *, small: bool = False) -> DataFrame:
        """Write ``frame`` as table ``name`` and return the table read back: what comes
        after reads the few written rows instead of computing them again. A small table
        is also written as one CSV file under csv/ (from the rows just written)."""
        if small:
            frame = frame.coalesce(1)
        step.begin(f"write {name}")
        frame.write.mode("overwrite").parquet(str(out / name))
        written = spark.read.parquet(str(out / name))
        if small:
            _as_csv_columns(F, written).coalesce(1).write.mode("overwrite").option(
                "header", True
            ).csv(str(out / "csv" / name))
        step(f"wrote {name}")
        return written

    duplicates = write(R.duplicate_copies(messages), "duplicate_copies", small=True)
    acked = R.acknowledgements(
        messages, pieces, ids, broadcast=piece_count <= limits.reconcile_broadcast_pieces_max
    )
    copy_count = (
        index.where(F.col("cluster") != F.col("origin_cluster"))
        .agg(F.sum("messages"))
        .collect()[0][0]
        or 0
    )
    lanes = R.link_lanes(index, link_rows).persist(keep)
    by_lane = R.linked(
        R.published(acked), R.replica_copies(acked), lanes, duplicates,
        broadcast_copies=copy_count <= limits.reconcile_broadcast_copies_max,
    ).persist(keep)  # fmt: skip
    linked = R.named(by_lane, lanes)
    translation = R.acked_translation(linked, subscriptions, ids)
    positions = write(R.translated_positions(translation, ranges), "translated_positions")
    risk = write(R.redelivery_risk(translation), "redelivery_risk")
    skips = write(R.skip_risk(linked, subscriptions, ids), "skip_risk")
    gap = write(R.replication_gap(linked), "replication_gap")
    undecodable = write(R.undecodable_copies(linked), "undecodable_copies")
    by_lane.unpersist()
    differences = write(R.batch_differences(risk, skips, subscriptions), "batch_differences",
                        small=True)  # fmt: skip
    gaps = write(R.gap_summary(gap), "replication_gaps", small=True)
    links_table = write(
        R.link_summary(index, link_rows, gaps, duplicates, R.unmapped_copies(index), undecodable),
        "link_summary",
        small=True,
    )
    subscriptions_table = write(
        R.subscription_summary(positions, skips, subscriptions, link_rows),
        "subscription_summary",
        small=True,
    )
    local = R.local_messages(messages)

    observed = None
    if inputs.deliveries is not None:
        computed = R.observed(inputs.deliveries, local, gap)
        observed = R.Observed(
            duplicates=write(computed.duplicates, "observed_duplicates"),
            redeliveries=write(computed.redeliveries, "observed_redeliveries"),
            losses=write(computed.losses, "observed_losses"),
        )

    step.begin("collect totals and timelines")
    totals = _totals(F, checked, index, links_table, subscriptions_table, observed,
                     differences, subscriptions)  # fmt: skip
    timelines = _timelines(
        spark, F, R, index, local, gap, risk, skips, observed, links_table, subscriptions_table
    )
    step("timelines collected")
    step.begin("collect the report's tables")
    tables = _report_tables(F, links_table, gaps, subscriptions_table, spark, out, observed,
                            duplicates, differences)  # fmt: skip
    link_verdicts = _link_verdicts(R, links_table, subscriptions_table)
    failovers = {}
    if inputs.deliveries is not None:
        failovers = {
            row.topic: (row.last_before_ms, row.first_after_ms)
            for row in R.failover_windows(inputs.deliveries).collect()  # one row per topic
        }
    if title is None:
        clusters = sorted(row.cluster for row in index.select("cluster").distinct().collect())
        title = (
            f"georep reconciliation of {', '.join(clusters)},"
            f" {time.strftime('%Y-%m-%d %H:%M', time.gmtime(run_at))} UTC"
        )
    page = report.render(
        title=title,
        totals=totals,
        tables=tables,
        timelines=timelines,
        links=link_verdicts,
        inputs=inputs_named or [],
        deliveries=deliveries_path,
        drill_page=_drill_page(deliveries_path, out),
        failovers=failovers,
    )
    (out / "report.html").write_text(page, encoding="utf-8")
    (out / "summary.json").write_text(json.dumps(totals, indent=2, sort_keys=True) + "\n")
    step("report.html written")
    spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]  # None clears it
    spark.catalog.clearCache()
    return totals


def _as_csv_columns(F: ModuleType, frame: DataFrame) -> DataFrame:
    """``frame`` with each array column joined by spaces and each struct as JSON: what a
    CSV cell can hold."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    columns = []
    for field in frame.schema.fields:
        column = F.col(field.name)
        if isinstance(field.dataType, ArrayType):
            column = F.array_join(column.cast("array<string>"), " ")
        elif isinstance(field.dataType, StructType | MapType):
            column = F.to_json(column)
        columns.append(column.alias(field.name))
    return frame.select(*columns)


def _link_verdicts(
    R: ModuleType, links_table: DataFrame, subscriptions_table: DataFrame
) -> list[dict[str, Any]]:
    """Per link pair, its totals and its subscription most at risk (small: one row per
    pair of clusters)."""
    worst = {
        (row.origin_cluster, row.replica_cluster): row.asDict()
        for row in R.worst_subscriptions(subscriptions_table).collect()
    }
    verdicts = []
    for row in (
        R.link_totals(links_table, subscriptions_table)
        .orderBy("origin_cluster", "replica_cluster")
        .collect()
    ):
        link = row.asDict()
        link["worst"] = worst.get((row.origin_cluster, row.replica_cluster))
        verdicts.append(link)
    return verdicts


def _drill_page(deliveries_path: str | None, out: Path) -> str | None:
    """The drill's report.html beside its delivery log, as a link relative to ``out``."""
    if not deliveries_path:
        return None
    page = Path(deliveries_path).resolve().parent / "report.html"
    if not page.is_file():
        return None
    return os.path.relpath(page, out.resolve())


def _totals(
    F: ModuleType,
    checked: CheckedExports,
    index: DataFrame,
    links_table: DataFrame,
    subscriptions_table: DataFrame,
    observed: Observed | None,
    differences: DataFrame,
    subscriptions: DataFrame,
) -> dict[str, Any]:
    """Every total in one Spark job: single-row aggregates joined side by side."""
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
    combined = parts[0]
    for part in parts[1:]:
        combined = combined.crossJoin(part)
    totals = {"messages": checked.rows["messages"], **combined.collect()[0].asDict()}
    return {k: int(v or 0) for k, v in totals.items()}


def _timelines(
    spark: SparkSession,
    F: ModuleType,
    R: ModuleType,
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
    bounds = R.timeline_bounds(index.where(F.col("topic").isin(chosen))).persist()
    series = [
        R.timeline_counts(local, bounds, "published"),
        R.timeline_counts(gap, bounds, "replication_gap"),
        R.timeline_counts(risk, bounds, "redelivery_risk"),
        R.timeline_counts(skips, bounds, "skip_risk"),
    ]
    if observed is not None:
        series.append(
            R.timeline_counts(
                observed.duplicates.where(F.col("publish_time").isNotNull()),
                bounds,
                "observed_duplicates",
            )
        )
        series.append(R.timeline_counts(observed.losses, bounds, "observed_losses"))
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


def _report_tables(
    F: ModuleType,
    links_table: DataFrame,
    gaps: DataFrame,
    subs_table: DataFrame,
    spark: SparkSession,
    out: Path,
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


if __name__ == "__main__":
    sys.exit(main())
