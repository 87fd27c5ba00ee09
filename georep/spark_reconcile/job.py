"""``georep reconcile``: the audit's Spark job (docs/AUDIT.md).

Run as ``georep reconcile --input A/ B/ [--deliveries LOG] --out OUT`` (Spark in local
mode, ``local[*]``, unless ``--master`` names another), or as
``spark-submit georep/spark_reconcile/job.py --input ... --out ...`` (the master and
resources are then spark-submit's). The Spark UI is off unless ``--ui``.

Steps: check the inputs' footers (``inputs.py``; bad input fails here, before Spark
starts), load them, run the transformations of ``reconciliation.py`` (with
``acknowledged_ranges.py`` and, given a delivery log, ``observed.py``), write each result
as a Parquet table under OUT (the small ones also as CSV under OUT/csv/), collect the
small aggregates (``page_figures.py``, bounded by ``limits.reconcile_report_*``) into
OUT/summary.json and the page OUT/report.html (``report.py``). This module owns the
command, the Spark session and the order of the steps.

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

    from georep.spark_reconcile import acknowledged_ranges as A
    from georep.spark_reconcile import observed as O
    from georep.spark_reconcile import page_figures, report
    from georep.spark_reconcile import reconciliation as R
    from georep.spark_reconcile.inputs import load

    keep = StorageLevel.MEMORY_AND_DISK
    step = _Steps(17 if deliveries_path else 14, quiet, spark.sparkContext)
    out.mkdir(parents=True, exist_ok=True)
    inputs = load(spark, checked, deliveries_path)
    step("inputs checked")

    messages = inputs.messages
    subscriptions = inputs.subscriptions.persist(keep)
    ids = A.subscription_ids(subscriptions).persist(keep)
    declared = (
        spark.createDataFrame(links, "origin_cluster string, replica_cluster string")
        if links
        else None
    )
    index = R.message_index(messages).persist(keep)
    link_rows = R.links(index, declared).persist(keep)
    ranges = A.acknowledged_ranges(subscriptions).persist(keep)
    pieces = A.range_pieces(ranges, R.ledgers(index)).persist(keep)
    step.begin("cut acknowledged ranges into pieces")
    piece_count = pieces.count()
    step(f"acknowledged ranges cut into {piece_count} pieces")

    def write(frame: DataFrame, name: str, *, small: bool = False) -> DataFrame:
        """Write ``frame`` as table ``name`` and return the table read back: what comes
        after reads the few written rows instead of computing them again. A small table
        is also written as one CSV file under csv/ (from the rows just written). The
        table is read back with the schema just written (as Spark reads any file, every
        column nullable): read without one, Spark would run a job to read a footer."""
        if small:
            frame = frame.coalesce(1)
        step.begin(f"write {name}")
        frame.write.mode("overwrite").parquet(str(out / name))
        written = spark.read.schema(frame.schema).parquet(str(out / name))
        if small:
            _as_csv_columns(F, written).coalesce(1).write.mode("overwrite").option(
                "header", True
            ).csv(str(out / "csv" / name))
        step(f"wrote {name}")
        return written

    duplicates = write(R.duplicate_copies(messages), "duplicate_copies", small=True)
    acked = A.acknowledgements(
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
        computed = O.observed(inputs.deliveries, local, gap)
        observed = O.Observed(
            duplicates=write(computed.duplicates, "observed_duplicates"),
            redeliveries=write(computed.redeliveries, "observed_redeliveries"),
            losses=write(computed.losses, "observed_losses"),
        )

    step.begin("collect totals and timelines")
    totals = page_figures.totals(checked, index, links_table, subscriptions_table, observed,
                                 differences, subscriptions)  # fmt: skip
    timelines = page_figures.timelines(
        index, local, gap, risk, skips, observed, links_table, subscriptions_table
    )
    step("timelines collected")
    step.begin("collect the report's tables")
    tables = page_figures.report_tables(links_table, gaps, subscriptions_table, observed,
                                        duplicates, differences)  # fmt: skip
    link_verdicts = page_figures.link_verdicts(links_table, subscriptions_table)
    failovers = {}
    if inputs.deliveries is not None:
        failovers = {
            row.topic: (row.last_before_ms, row.first_after_ms)
            for row in O.failover_windows(inputs.deliveries).collect()  # one row per topic
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


def _drill_page(deliveries_path: str | None, out: Path) -> str | None:
    """The drill's report.html beside its delivery log, as a link relative to ``out``."""
    if not deliveries_path:
        return None
    page = Path(deliveries_path).resolve().parent / "report.html"
    if not page.is_file():
        return None
    return os.path.relpath(page, out.resolve())


if __name__ == "__main__":
    sys.exit(main())
