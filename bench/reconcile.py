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

With ``--cluster [WORKERS]`` (default 2) the same inputs, generated once, are reconciled
twice, each time by a process of its own as ``georep reconcile`` would run (a cold driver
JVM): on ``local[*]``, then on a Spark standalone cluster started here
(``georep/spark_reconcile/standalone.py``: a master and WORKERS workers on loopback, each
worker with its share of this machine's cores and of the local run's driver memory). The
inputs are a local directory, which on one machine the driver and every worker read at
the same path. The JSON gives both runs' times (the application's start: the session
created and every executor registered; the reconciliation; the stop), rows/s, each run's
per-stage and per-step figures from its own UI's REST (``/api/v1`` on loopback: tasks,
executor run and CPU time, shuffle bytes read and written), whether both wrote the same
summary, and the difference, cluster minus local, by part and by step.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import machine

from georep import limits
from georep.spark_reconcile import job, standalone
from georep.spark_reconcile.inputs import check_exports

#: The checkout: its ``georep`` goes on the Spark workers' import path.
REPO = Path(__file__).resolve().parents[1]

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

TOPICS, PARTITIONS, BATCH = 4, 2, 4
LEDGER_ENTRIES = 50_000
GAP_FRACTION, ORIGIN_ACKED, REPLICA_ACKED = 0.01, 0.80, 0.70
RANGES = 1_000
PARTLY_ACKED_BATCHES = 1_000
BASE_MS = 1_700_000_000_000
#: B stores A's ledger L as L + REPLICA_LEDGERS, and its second copies in L + TWICE_LEDGERS.
REPLICA_LEDGERS, TWICE_LEDGERS = 1_000_000, 2_000_000


def _ledger_of(first_ledger: Column, entry_index: Column) -> Column:
    from pyspark.sql import functions as F

    return first_ledger + F.floor(entry_index / LEDGER_ENTRIES)


def _entry_of(entry_index: Column) -> Column:
    return (entry_index % LEDGER_ENTRIES).cast("long")


def generate(spark: SparkSession, root: Path, origin_rows: int) -> dict[str, Any]:
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

    def as_export(
        frame: DataFrame, cluster: str, origin_ledger: Column, origin_entry: Column
    ) -> DataFrame:
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

    def subscriptions(
        cluster: str, acked_fraction: float, ranges: bool, ledger_offset: int
    ) -> DataFrame:
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


# --- --cluster: local[*] and a standalone cluster, each run in a process of its own ---

#: Every run's UI is on, bound to loopback on an ephemeral port, for its /api/v1 (stage
#: figures); nothing else differs from ``georep reconcile``'s own settings.
RUN_CONF = {
    "spark.ui.port": "0",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
BEFORE_STEPS = "(before the first step: loading the inputs)"


def _child(
    args: argparse.Namespace, phase: str, extra: list[str], env: dict[str, str]
) -> dict[str, Any]:
    """Run this script's ``phase`` in a process of its own; its last stdout line is its
    JSON. stderr (the job's steps) passes through."""
    command = [
        sys.executable, str(Path(__file__).resolve()), "--phase", phase,
        "--rows", str(args.rows), "--dir", str(args.dir),
        "--driver-memory-mib", str(args.driver_memory_mib), *extra,
    ]  # fmt: skip
    started = time.monotonic()
    done = subprocess.run(command, env=env, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench/reconcile.py: {phase} {extra} exited {done.returncode}")
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    answer["process_s"] = round(time.monotonic() - started, 2)
    return answer


def _generate_phase(args: argparse.Namespace) -> int:
    spark = job.start_spark(
        driver_memory_mib=args.driver_memory_mib,
        conf={"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MILLIS"},
    )
    try:
        started = time.monotonic()
        shape = generate(spark, args.dir / "in", args.rows // 2)
        shape["generate_s"] = round(time.monotonic() - started, 2)
    finally:
        spark.stop()
    print(json.dumps(shape))
    return 0


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.load(answer)


def _ms(stamp: str | None) -> float | None:
    """The REST's ``2026-11-25T12:00:00.123GMT`` as epoch milliseconds."""
    if not stamp:
        return None
    parsed = datetime.strptime(stamp.removesuffix("GMT"), "%Y-%m-%dT%H:%M:%S.%f")
    return parsed.replace(tzinfo=UTC).timestamp() * 1000


def _union_s(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of (start ms, end ms) intervals."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total / 1000


def _settled(api: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Jobs and stage attempts from the application's /api/v1 once its status listener
    has seen every job end (it hears of them asynchronously)."""
    previous = None
    jobs: list[dict[str, Any]] = []
    stages: list[dict[str, Any]] = []
    for _ in range(60):
        jobs = _get(f"{api}/jobs")
        stages = _get(f"{api}/stages")
        state = (len(jobs), len(stages), sum(s["numCompleteTasks"] for s in stages))
        running = any(j["status"] == "RUNNING" for j in jobs) or any(
            s["status"] == "ACTIVE" for s in stages
        )
        if not running and state == previous:
            return jobs, stages
        previous = state
        time.sleep(0.5)
    return jobs, stages


def _figures(stages: list[dict[str, Any]]) -> dict[str, Any]:
    """What the executors did in these completed stage attempts, summed."""
    return {
        "stages": len(stages),
        "tasks": sum(s["numCompleteTasks"] for s in stages),
        "executor_run_s": round(sum(s["executorRunTime"] for s in stages) / 1000, 2),
        "executor_cpu_s": round(sum(s["executorCpuTime"] for s in stages) / 1e9, 2),
        "executor_deserialize_s": round(
            sum(s["executorDeserializeTime"] for s in stages) / 1000, 2
        ),
        "gc_s": round(sum(s["jvmGcTime"] for s in stages) / 1000, 2),
        "shuffle_fetch_wait_s": round(sum(s["shuffleFetchWaitTime"] for s in stages) / 1000, 2),
        "shuffle_read_bytes": sum(s["shuffleReadBytes"] for s in stages),
        "shuffle_local_read_bytes": sum(s["shuffleLocalBytesRead"] for s in stages),
        "shuffle_remote_read_bytes": sum(s["shuffleRemoteBytesRead"] for s in stages),
        "shuffle_write_bytes": sum(s["shuffleWriteBytes"] for s in stages),
        "input_bytes": sum(s["inputBytes"] for s in stages),
        "output_bytes": sum(s["outputBytes"] for s in stages),
        "spilled_disk_bytes": sum(s["diskBytesSpilled"] for s in stages),
    }


def _stage_breakdown(api: str, job_started_ms: float, job_ended_ms: float) -> dict[str, Any]:
    """Per stage and per step of the job (its Spark jobs' descriptions, ``[n/N] what``)
    the application's own figures, from its UI's REST."""
    jobs, stages = _settled(api)
    step_of_stage: dict[int, str] = {}
    job_intervals: dict[str, list[tuple[float, float]]] = {}
    for spark_job in jobs:
        step = spark_job.get("description") or BEFORE_STEPS
        for stage_id in spark_job["stageIds"]:
            step_of_stage.setdefault(stage_id, step)
        start, end = _ms(spark_job.get("submissionTime")), _ms(spark_job.get("completionTime"))
        if start is not None and end is not None:
            job_intervals.setdefault(step, []).append((start, end))
    complete = [s for s in stages if s["status"] == "COMPLETE"]
    per_stage = []
    for stage in sorted(complete, key=lambda s: (s["stageId"], s["attemptId"])):
        start, end = _ms(stage.get("submissionTime")), _ms(stage.get("completionTime"))
        per_stage.append(
            {
                "stage": stage["stageId"],
                "attempt": stage["attemptId"],
                "step": step_of_stage.get(stage["stageId"], BEFORE_STEPS),
                "name": stage["name"],
                "wall_s": round((end - start) / 1000, 2) if start and end else None,
                **{k: v for k, v in _figures([stage]).items() if k != "stages"},
            }
        )
    steps = []
    for step in dict.fromkeys(step_of_stage.get(s["stage"], BEFORE_STEPS) for s in per_stage):
        mine = [s for s in complete if step_of_stage.get(s["stageId"], BEFORE_STEPS) == step]
        steps.append(
            {
                "step": step,
                "jobs": len(job_intervals.get(step, [])),
                "wall_s": round(_union_s(job_intervals.get(step, [])), 2),
                **_figures(mine),
            }
        )
    in_jobs_s = _union_s([i for spans in job_intervals.values() for i in spans])
    return {
        "jobs": len(jobs),
        "stages_skipped": sum(s["status"] == "SKIPPED" for s in stages),
        "stages_failed": sum(s["status"] == "FAILED" for s in stages),
        "in_spark_jobs_s": round(in_jobs_s, 2),
        "outside_spark_jobs_s": round((job_ended_ms - job_started_ms) / 1000 - in_jobs_s, 2),
        **_figures(complete),
        "by_step": steps,
        "by_stage": per_stage,
    }


def _run_phase(args: argparse.Namespace) -> int:
    """One run of the job on ``--master``, timed: the application's start (the session
    created, then every expected executor registered), the job (input checks to
    report.html, as the benchmark has always timed it), and the stop."""
    conf = dict(RUN_CONF)
    conf.update(dict(pair.split("=", 1) for pair in args.conf))
    started = time.monotonic()
    spark = job.start_spark(
        master=args.master, ui=True, driver_memory_mib=args.driver_memory_mib, conf=conf
    )
    session_s = time.monotonic() - started
    context = spark.sparkContext
    api = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}"
    try:
        # ready once every expected executor registered (the status tracker lists the
        # driver too); the job would otherwise start on whichever came first
        tracker = context._jsc.sc().statusTracker()
        while len(tracker.getExecutorInfos()) - 1 < args.executors:
            if time.monotonic() - started > 300:
                raise SystemExit(f"not all {args.executors} executors registered in 300 s")
            time.sleep(0.1)
        ready_s = time.monotonic() - started
        job_started_ms = time.time() * 1000
        job_started = time.monotonic()
        inputs = args.dir / "in"
        checked = check_exports([str(inputs / "A"), str(inputs / "B")])
        totals = job.reconcile(spark, checked, None, args.out)
        job_s = time.monotonic() - job_started
        job_ended_ms = time.time() * 1000
        breakdown = _stage_breakdown(api, job_started_ms, job_ended_ms)
        cores = context.defaultParallelism
        executors = [
            {
                "id": e["id"],
                "host_port": e["hostPort"],
                "cores": e["totalCores"],
                "storage_memory_mib": round(e["maxMemory"] / 2**20),
            }
            for e in _get(f"{api}/executors")
        ]
    finally:
        stopping = time.monotonic()
        spark.stop()
        stop_s = time.monotonic() - stopping
    rows = checked.rows["messages"]
    print(
        json.dumps(
            {
                "master": context.master,
                "spark_cores": cores,
                "app_start_s": round(ready_s, 2),
                "session_s": round(session_s, 2),
                "executors_wait_s": round(ready_s - session_s, 2),
                "wall_s": round(job_s, 2),
                "rows": rows,
                "rows_per_s": round(rows / job_s),
                "stop_s": round(stop_s, 2),
                "end_to_end_s": round(ready_s + job_s + stop_s, 2),
                "executors": executors,
                "spark_conf": conf,
                "breakdown": breakdown,
                "totals": totals,
            }
        )
    )
    return 0


def _difference(local: dict[str, Any], cluster: dict[str, Any]) -> dict[str, Any]:
    """Cluster minus local[*], where it goes: the application's start, then the job split
    into time outside Spark jobs (the driver's own work) and each step's Spark jobs, with
    the executors' work and the shuffle behind it."""
    keys = ["executor_run_s", "executor_cpu_s", "executor_deserialize_s", "gc_s",
            "shuffle_fetch_wait_s", "shuffle_remote_read_bytes", "tasks"]  # fmt: skip
    lb, cb = local["breakdown"], cluster["breakdown"]
    local_steps = {s["step"]: s for s in lb["by_step"]}
    by_step = []
    for step in cb["by_step"]:
        mine = local_steps.get(step["step"], {})
        by_step.append(
            {
                "step": step["step"],
                "wall_s": round(step["wall_s"] - mine.get("wall_s", 0), 2),
                "executor_run_s": round(step["executor_run_s"] - mine.get("executor_run_s", 0), 2),
                "shuffle_remote_read_bytes": step["shuffle_remote_read_bytes"],
            }
        )
    by_step.sort(key=lambda s: -abs(s["wall_s"]))
    return {
        "app_start_s": round(cluster["app_start_s"] - local["app_start_s"], 2),
        "session_s": round(cluster["session_s"] - local["session_s"], 2),
        "executors_wait_s": round(cluster["executors_wait_s"] - local["executors_wait_s"], 2),
        "wall_s": round(cluster["wall_s"] - local["wall_s"], 2),
        "job_in_spark_jobs_s": round(cb["in_spark_jobs_s"] - lb["in_spark_jobs_s"], 2),
        "job_outside_spark_jobs_s": round(
            cb["outside_spark_jobs_s"] - lb["outside_spark_jobs_s"], 2
        ),
        **{k: round(cb[k] - lb[k], 2) for k in keys},
        "by_step_largest_first": by_step,
    }


def compare(args: argparse.Namespace) -> int:
    """Generate the inputs once, reconcile them on local[*], then on a standalone cluster
    of ``args.cluster`` workers started here; one JSON with both and the difference."""
    workers = args.cluster
    cpus = os.cpu_count() or 1
    worker_cores = max(1, cpus // workers)
    executor_mib = args.executor_memory_mib or args.driver_memory_mib // workers
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    env = standalone.spark_env(args.dir / "driver")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    try:
        shape = _child(args, "generate", [], env)
        local = _child(
            args, "run", ["--master", "local[*]", "--out", str(args.dir / "out-local")], env
        )
        started = time.monotonic()
        with standalone.cluster(
            args.dir / "standalone",
            workers=workers,
            worker_cores=worker_cores,
            worker_memory_mib=executor_mib,
        ) as running:
            cluster_start_s = time.monotonic() - started
            cluster = _child(
                args, "run",
                ["--master", running.url, "--out", str(args.dir / "out-cluster"),
                 "--executors", str(workers),
                 "--conf", f"spark.executor.memory={executor_mib}m",
                 "--conf", f"spark.executor.cores={worker_cores}",
                 "--conf", f"spark.cores.max={worker_cores * workers}"],
                env,
            )  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(args.dir / "in", ignore_errors=True)
    cluster.update(
        workers=workers,
        worker_cores=worker_cores,
        worker_memory_mib=executor_mib,
        executor_memory_mib=executor_mib,
        driver_memory_mib=args.driver_memory_mib,
        cluster_start_s=round(cluster_start_s, 2),
        worker_share=f"{cpus} cpus // {workers} workers = {worker_cores} core(s) each; "
        f"memory: the local run's driver memory ({args.driver_memory_mib} MiB) / {workers}",
    )
    local["driver_memory_mib"] = args.driver_memory_mib
    differing = {
        key: [local["totals"].get(key), cluster["totals"].get(key)]
        for key in sorted(set(local["totals"]) | set(cluster["totals"]))
        if local["totals"].get(key) != cluster["totals"].get(key)
    }
    print(
        json.dumps(
            {
                "benchmark": "reconcile",
                "rows": local["rows"],
                "generate_s": shape.pop("generate_s"),
                "generate_process_s": shape.pop("process_s"),
                **shape,
                "inputs": f"{args.dir / 'in'}: a local directory, read at the same path by "
                "the driver and every worker (one machine; on several, shared storage)",
                "machine": {**machine(), "cpus": cpus},
                "local": local,
                "cluster": cluster,
                "timings": {
                    name: {
                        k: run[k] for k in ("wall_s", "rows_per_s", "app_start_s", "end_to_end_s")
                    }
                    for name, run in (("local", local), ("cluster", cluster))
                },
                "shuffle_note": "one machine: an executor reads the others' shuffle files "
                "from the local disk (spark.shuffle.readHostLocalDisk): expect "
                "shuffle_remote_read_bytes 0, no shuffle byte crossing a network",
                "timed": "app_start_s: session created and every executor registered; "
                "wall_s: the reconciliation (input checks to report.html), as without "
                "--cluster; end_to_end_s: both and the stop. Each run is a process of its "
                "own (a cold driver JVM), its UI on loopback for its /api/v1 figures",
                "same_summary": not differing,
                "summary_differences": differing,
                "summary": local["totals"] if not differing else None,
                "difference_cluster_minus_local": _difference(local, cluster),
            },
            sort_keys=True,
        )
    )
    return 0 if not differing else 1


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
    parser.add_argument(
        "--cluster",
        type=int,
        nargs="?",
        const=2,
        default=None,
        metavar="WORKERS",
        help="also run on a Spark standalone cluster of WORKERS workers (default 2) started "
        "on this machine, after local[*], and compare",
    )
    parser.add_argument(
        "--executor-memory-mib",
        type=int,
        default=None,
        help="with --cluster: each worker's (and executor's) memory; default the local "
        "run's driver memory divided among the workers",
    )
    # with --cluster each run is a process of its own (a cold driver JVM, as the command's)
    parser.add_argument("--phase", choices=["generate", "run"], help=argparse.SUPPRESS)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--executors", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--conf", action="append", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args()  # fmt: skip

    if args.phase == "generate":
        return _generate_phase(args)
    if args.phase == "run":
        return _run_phase(args)
    if args.cluster is not None:
        return compare(args)
    return single(args)


def single(args: argparse.Namespace) -> int:
    """Today's benchmark: generation and reconciliation in one local[*] session."""
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
