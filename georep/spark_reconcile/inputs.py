"""The reconciliation's input, checked before any work starts.

``check_exports`` reads only Parquet footers (no rows) of every file under each export
directory and refuses, with one message naming the file, what the job cannot use: a
missing directory or table, an unreadable file, a missing column or one of another type,
a schema version this georep does not read (:data:`schema.READABLE_VERSIONS`), a file of
one table under the other's directory, no messages at all. It runs before Spark starts,
so bad input fails in a second. ``load`` then reads the checked files as DataFrames.

A delivery log (``--deliveries``) is JSON lines or Parquet (a file or a directory of
them); it is checked with one aggregation over it (the log of a drill is small): lines
that are not JSON objects, columns missing or not numbers, phases other than ``before``
and ``after``, times that do not parse, an ``acked`` that is not a boolean. ``acked`` is
optional: absent (or null), a delivery is taken as acknowledged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from georep import limits
from georep.spark_reconcile import schema
from georep.spark_reconcile.errors import InputError

if TYPE_CHECKING:  # pyspark is the optional extra 'spark': imported where it runs
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType


@dataclass(frozen=True)
class CheckedExports:
    """Files of each table, in a stable order, and the rows the footers announce."""

    files: dict[str, list[str]]
    rows: dict[str, int]


def check_exports(directories: list[str]) -> CheckedExports:
    if not directories:
        raise InputError("no input directory given")
    if len(directories) > limits.reconcile_inputs_count_max:
        raise InputError(
            f"{len(directories)} input directories; at most {limits.reconcile_inputs_count_max}"
        )
    files: dict[str, list[str]] = {table: [] for table in schema.TABLES}
    rows = {table: 0 for table in schema.TABLES}
    versions: dict[int, list[str]] = {}
    for directory in directories:
        root = Path(directory)
        if not root.is_dir():
            raise InputError(f"input {directory}: no such directory")
        for table in schema.TABLES:
            table_files = _table_files(root, table)
            for path in table_files:
                version, count = _check_file(path, table)
                versions.setdefault(version, []).append(str(path))
                rows[table] += count
            files[table] += [str(path) for path in table_files]
    _check_versions(versions)
    if rows[schema.MESSAGES] == 0:
        raise InputError(
            "the inputs hold no messages: nothing to reconcile (" + ", ".join(directories) + ")"
        )
    return CheckedExports(files=files, rows=rows)


def _table_files(root: Path, table: str) -> list[Path]:
    directory = root / table
    if not directory.is_dir():
        raise InputError(
            f"input {root}: no {table}/ directory (is it the output of `georep export`?)"
        )
    found = sorted(
        path
        for path in directory.iterdir()
        if path.suffix == ".parquet" and not path.name.startswith((".", "_"))
    )
    if not found:
        raise InputError(f"input {root}: no Parquet files under {directory}")
    return found


def _check_file(path: Path, table: str) -> tuple[int, int]:
    """(schema version, rows) of one file, or InputError saying what is wrong with it."""
    try:
        metadata = pq.read_metadata(path)
        file_schema = metadata.schema.to_arrow_schema()
    except (OSError, pa.ArrowException) as error:
        raise InputError(f"cannot read {path}: {_first_line(error)}") from None
    declared = (file_schema.metadata or {}).get(schema.TABLE_KEY)
    if declared is not None and declared.decode(errors="replace") != table:
        raise InputError(f"{path} holds the {declared.decode(errors='replace')} table, not {table}")
    expected = schema.SCHEMAS[table]
    missing = [name for name in expected.names if name not in file_schema.names]
    if missing:
        version = _version_of(path, metadata, file_schema)
        if set(missing) <= set(schema.added_after(version, table)):
            # written before those columns existed: read without them (null)
            expected = pa.schema([f for f in expected if f.name not in missing])
            missing = []
    if missing:
        raise InputError(
            f"{path}: missing column(s) {', '.join(missing)} "
            f"(the {table} table of schema version {schema.SCHEMA_VERSION} has "
            f"{', '.join(expected.names)})"
        )
    for wanted in expected:
        found = file_schema.field(wanted.name).type
        if not _compatible(found, wanted.type):
            raise InputError(
                f"{path}: column {wanted.name} is {found}; schema version "
                f"{schema.SCHEMA_VERSION} needs {wanted.type}"
            )
    return _version_of(path, metadata, file_schema), metadata.num_rows


def _compatible(found: pa.DataType, wanted: pa.DataType) -> bool:
    if pa.types.is_timestamp(wanted):
        # any unit; an instant (with a time zone), not a wall-clock time
        return pa.types.is_timestamp(found) and found.tz is not None
    if pa.types.is_string(wanted):
        return bool(pa.types.is_string(found) or pa.types.is_large_string(found))
    if pa.types.is_list(wanted):
        if not (pa.types.is_list(found) or pa.types.is_large_list(found)):
            return False
        item, wanted_item = found.value_type, wanted.value_type
        if pa.types.is_struct(wanted_item):
            return pa.types.is_struct(item) and all(
                item.get_field_index(f.name) >= 0 and _compatible(item.field(f.name).type, f.type)
                for f in wanted_item
            )
        return _compatible(item, wanted_item)
    return bool(found == wanted)


def _version_of(path: Path, metadata: pq.FileMetaData, file_schema: pa.Schema) -> int:
    """The file's schema version: from its footer's key-value metadata when present,
    else from the ``schema_version`` column (its statistics, or its values)."""
    declared = (file_schema.metadata or {}).get(schema.VERSION_KEY)
    if declared is not None:
        try:
            return int(declared)
        except ValueError:
            raise InputError(f"{path}: schema version {declared!r} is not a number") from None
    seen: set[int] = set()
    column = file_schema.get_field_index("schema_version")
    for group in range(metadata.num_row_groups):
        statistics = metadata.row_group(group).column(column).statistics
        if statistics is None or not statistics.has_min_max:
            seen = set(
                pq.read_table(path, columns=["schema_version"]).column(0).unique().to_pylist()
            )
            break
        seen.update({statistics.min, statistics.max})
    seen.discard(None)
    if len(seen) > 1:
        raise InputError(f"{path}: mixed schema versions {sorted(seen)} in one file")
    return seen.pop() if seen else schema.SCHEMA_VERSION


def _check_versions(versions: dict[int, list[str]]) -> None:
    foreign = {v: paths for v, paths in versions.items() if v not in schema.READABLE_VERSIONS}
    if not foreign:
        return
    described = "; ".join(
        f"schema version {version} in {_some(paths)}" for version, paths in sorted(foreign.items())
    )
    *earlier, last = schema.READABLE_VERSIONS
    readable = f"{', '.join(str(v) for v in earlier)} and {last}" if earlier else str(last)
    mixed = ""
    if len(versions) > 1:
        listed = ", ".join(str(v) for v in sorted(versions))
        mixed = f" (the inputs mix versions {listed}: export every cluster with the same georep)"
    raise InputError(f"{described}; this georep reads versions {readable}{mixed}")


def _some(paths: list[str], shown: int = 3) -> str:
    more = len(paths) - shown
    return ", ".join(paths[:shown]) + (f" and {more} more" if more > 0 else "")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# --- loading (Spark) ----------------------------------------------------------------
def spark_schema(table: str) -> StructType:
    """The Spark read schema of ``table``: the columns of ``schema.py``, all nullable."""
    from pyspark.sql import types as T

    def spark_type(arrow_type: pa.DataType) -> DataType:
        if pa.types.is_int32(arrow_type):
            return T.IntegerType()
        if pa.types.is_int64(arrow_type):
            return T.LongType()
        if pa.types.is_string(arrow_type):
            return T.StringType()
        if pa.types.is_timestamp(arrow_type):
            return T.TimestampType()
        if pa.types.is_list(arrow_type):
            return T.ArrayType(spark_type(arrow_type.value_type))
        if pa.types.is_struct(arrow_type):
            return T.StructType([T.StructField(f.name, spark_type(f.type)) for f in arrow_type])
        raise AssertionError(f"no Spark type for {arrow_type}")

    return T.StructType([T.StructField(f.name, spark_type(f.type)) for f in schema.SCHEMAS[table]])


@dataclass(frozen=True)
class Inputs:
    messages: DataFrame
    subscriptions: DataFrame
    deliveries: DataFrame | None


def load(spark: SparkSession, checked: CheckedExports, deliveries_path: str | None) -> Inputs:
    frames = {
        table: spark.read.schema(spark_schema(table))
        .parquet(*checked.files[table])
        .drop("schema_version")
        for table in schema.TABLES
    }
    from pyspark.sql import functions as F

    subscriptions = frames[schema.SUBSCRIPTIONS]
    for name in schema.ADDED_IN_VERSION[2][schema.SUBSCRIPTIONS]:  # null in version 1 files
        empty = F.array().cast(subscriptions.schema[name].dataType)
        subscriptions = subscriptions.withColumn(name, F.coalesce(name, empty))
    deliveries = load_deliveries(spark, deliveries_path) if deliveries_path else None
    return Inputs(frames[schema.MESSAGES], subscriptions, deliveries)


def _delivery_format(path: Path) -> str:
    if path.is_dir():
        names = [p.name for p in path.iterdir() if not p.name.startswith((".", "_"))]
        if not names:
            raise InputError(f"deliveries {path}: empty directory")
        return "parquet" if all(n.endswith(".parquet") for n in names) else "json"
    return "parquet" if path.suffix == ".parquet" else "json"


def load_deliveries(spark: SparkSession, path_text: str) -> DataFrame:
    """The delivery log as (cluster, topic, partition, subscription, origin identity,
    delivered_at timestamp, phase, acked), or InputError. ``acked`` is null where the log
    does not say."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    path = Path(path_text)
    if not path.exists():
        raise InputError(f"deliveries {path}: no such file")
    kind = _delivery_format(path)
    if kind == "parquet":
        try:
            raw = spark.read.parquet(str(path))
        except Exception as error:  # Spark raises its own AnalysisException here
            raise InputError(f"cannot read deliveries {path}: {_first_line(error)}") from None
        missing = [c for c in schema.DELIVERY_COLUMNS if c not in raw.columns]
        if missing:
            raise InputError(f"deliveries {path}: missing column(s) {', '.join(missing)}")
        corrupt = F.lit(None).cast("string")
    else:
        fields = [T.StructField(c, T.StringType()) for c in schema.DELIVERY_COLUMNS]
        fields += [
            T.StructField("partition", T.StringType()),
            T.StructField("schema_version", T.StringType()),
            T.StructField(schema.DELIVERY_ACKED, T.StringType()),
            T.StructField("_corrupt_record", T.StringType()),
        ]
        raw = (
            spark.read.schema(T.StructType(fields))
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", "_corrupt_record")
            .json(str(path))
        )
        corrupt = F.col("_corrupt_record")

    def text(name: str) -> Column:
        return F.col(name).cast("string") if name in raw.columns else F.lit(None).cast("string")

    def integer(name: str) -> Column:
        if name not in raw.columns:
            return F.lit(None).cast("long")
        return F.expr(f"try_cast(trim(cast(`{name}` as string)) as bigint)")

    delivered_text = text("delivered_at")
    if kind == "parquet" and isinstance(raw.schema["delivered_at"].dataType, T.TimestampType):
        delivered = F.col("delivered_at")
    else:
        delivered = F.when(
            delivered_text.rlike(r"^\s*[0-9]+\s*$"),
            F.timestamp_millis(integer("delivered_at")),
        ).otherwise(F.expr("try_to_timestamp(cast(delivered_at as string))"))
    topic = text("topic")
    partition_from_name = F.when(
        topic.rlike(r"-partition-(0|[1-9][0-9]*)$"),
        F.regexp_extract(topic, r"-partition-([0-9]+)$", 1).cast("int"),
    ).otherwise(F.lit(-1))
    base_topic = F.regexp_replace(topic, r"-partition-(0|[1-9][0-9]*)$", "")
    acked_text = F.lower(F.trim(text(schema.DELIVERY_ACKED)))
    acked = F.when(acked_text.isin("true", "1"), F.lit(True)).when(
        acked_text.isin("false", "0"), F.lit(False)
    )
    typed = raw.select(
        corrupt.alias("corrupt"),
        text("cluster").alias("cluster"),
        base_topic.alias("topic"),
        F.coalesce(integer("partition").cast("int"), partition_from_name).alias("partition"),
        text("subscription").alias("subscription"),
        text("origin_cluster").alias("origin_cluster"),
        integer("origin_ledger_id").alias("origin_ledger_id"),
        integer("origin_entry_id").alias("origin_entry_id"),
        integer("batch_index").cast("int").alias("batch_index"),
        delivered.alias("delivered_at"),
        F.lower(F.trim(text("phase"))).alias("phase"),
        acked.alias(schema.DELIVERY_ACKED),
        integer("schema_version").alias("schema_version"),
        *[text(c).alias(f"raw_{c}") for c in ("origin_ledger_id", "origin_entry_id",
                                                "batch_index", "delivered_at",
                                                schema.DELIVERY_ACKED)],
    )  # fmt: skip
    _check_deliveries(path, typed)
    return typed.where(F.col("corrupt").isNull()).select(
        "cluster", "topic", "partition", "subscription", "origin_cluster",
        "origin_ledger_id", "origin_entry_id", "batch_index", "delivered_at", "phase",
        schema.DELIVERY_ACKED,
    )  # fmt: skip


def _check_deliveries(path: Path, typed: DataFrame) -> None:
    from pyspark.sql import functions as F

    def count(condition: Column) -> Column:
        return F.sum(condition.cast("long"))

    clean = F.col("corrupt").isNull()
    checks = {
        "rows": F.count(F.lit(1)),
        "not JSON objects": count(~clean),
        "wrong phase (not before/after)": count(clean & ~F.col("phase").isin(*schema.PHASES)),
        f"schema version other than {schema.DELIVERY_SCHEMA_VERSION}": count(
            clean & F.col("schema_version").isNotNull()
            & (F.col("schema_version") != schema.DELIVERY_SCHEMA_VERSION)
        ),
    }  # fmt: skip
    for name in ("cluster", "topic", "subscription", "origin_cluster"):
        checks[f"no {name}"] = count(clean & F.col(name).isNull())
    for name in ("origin_ledger_id", "origin_entry_id", "batch_index", "delivered_at"):
        checks[f"no {name}"] = count(clean & F.col(f"raw_{name}").isNull())
        checks[f"{name} unreadable"] = count(
            clean & F.col(f"raw_{name}").isNotNull() & F.col(name).isNull()
        )
    acked = schema.DELIVERY_ACKED
    checks[f"{acked} not a boolean"] = count(
        clean & F.col(f"raw_{acked}").isNotNull() & F.col(acked).isNull()
    )
    row = typed.agg(*[expression.alias(str(i)) for i, expression in enumerate(checks.values())])
    values = row.collect()[0]
    found = dict(zip(checks, values, strict=True))
    if not found["rows"]:
        raise InputError(f"deliveries {path}: no rows")
    problems = [f"{n} rows: {name}" for name, n in found.items() if name != "rows" and n]
    if problems:
        raise InputError(f"deliveries {path}: " + "; ".join(problems))
