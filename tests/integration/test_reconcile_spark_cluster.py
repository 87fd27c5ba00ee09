"""``georep reconcile --master spark://…`` on a real Spark standalone cluster: a master
and two workers started from the installed pyspark (``spark-class``), all on 127.0.0.1
with ephemeral ports, once for the session. Small exports (and a delivery log) whose
reconciliation ``tests/unit/test_reconcile_job.py`` checks table by table in ``local``
mode are reconciled there: the summary must be the one ``local[*]`` gives (written out
below, from ``georep reconcile`` on the same cases). A second, local, run of the command
here would cost a minute of the suite for what the unit tests already hold; the local
command's stderr (the steps, nothing of Spark's) is checked in test_export_cluster.py.

Executors run on the workers: they read the inputs and write the tables by path, so
this checks what a cluster on shared storage does (docs/AUDIT.md, "On a Spark cluster").
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.test_reconcile_job import case_q, case_t, deliveries_for_t, write_cases

pyspark = pytest.importorskip("pyspark")
pq = pytest.importorskip("pyarrow.parquet")

#: Two cold starts of the command (a JVM each) and a cluster's start: minutes on a
#: loaded machine, whatever the few rows.
pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]

SPARK_HOME = Path(pyspark.__file__).parent
WORKERS = 2
START_TIMEOUT_S = 180
RUN_TIMEOUT_S = 600
#: What ``georep reconcile`` in ``local[*]`` answers for cases T and Q with T's deliveries.
LOCAL_SUMMARY = {
    "acked_on_origin": 20,
    "batch_entries_differing": 3,
    "batch_entries_partly_acked": 4,
    "clusters": 2,
    "duplicate_copies": 0,
    "links": 2,
    "messages": 38,
    "observed_duplicates": 4,
    "observed_losses": 3,
    "observed_redeliveries": 0,
    "redelivery_risk": 6,
    "replication_gap": 3,
    "skip_risk": 3,
    "subscriptions": 3,
    "topics": 2,
    "unmapped_copies": 0,
}


def _spark_env(root: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(root / "local"),
        "SPARK_LOG_DIR": str(root / "logs"),
        # the executors' Python, should the job ever need one: this interpreter's
        "PYSPARK_PYTHON": sys.executable,
    }


def _wait_for(path: Path, pattern: str, count: int, process: subprocess.Popen) -> list[str]:
    """The first ``count`` matches of ``pattern`` in the log at ``path``; fails if the
    process exits or the time runs out first."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        found = re.findall(pattern, path.read_text(errors="replace"))
        if len(found) >= count:
            return found[:count]
        if process.poll() is not None:
            break
        time.sleep(0.5)
    tail = path.read_text(errors="replace")[-3000:]
    pytest.fail(f"Spark standalone: no {pattern!r} x{count} in {path.name}:\n{tail}")


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: stopped whole below
        )


@pytest.fixture(scope="session")
def spark_master(tmp_path_factory) -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a master with two registered workers (1 core, 1 GiB
    each); every process stopped at the end of the session."""
    root = tmp_path_factory.mktemp("spark-standalone")
    env = _spark_env(root)
    processes = []
    try:
        master_log = root / "master.log"
        master = _start(
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", "0", "--webui-port", "0"],
            master_log, env,
        )  # fmt: skip
        processes.append(master)
        [url] = _wait_for(master_log, r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", 1,
                          master)  # fmt: skip
        for n in range(WORKERS):
            worker = [
                "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0",
                "--webui-port", "0", "--cores", "1", "--memory", "1g",
                "--work-dir", str(root / f"work-{n}"), url,
            ]  # fmt: skip
            processes.append(_start(worker, root / f"worker-{n}.log", env))
        _wait_for(master_log, r"Registering worker 127\.0\.0\.1:\d+", WORKERS, master)
        yield url
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def reconcile(out: Path, inputs: list[str], deliveries: str, env: dict[str, str], *extra: str):
    georep = Path(sys.executable).with_name("georep")
    return subprocess.run(
        [str(georep), "reconcile", "--input", *inputs, "--deliveries", deliveries,
         "--out", str(out), *extra],
        capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT_S, check=False,
    )  # fmt: skip


def rows(out: Path, table: str) -> list[str]:
    frame = pq.read_table(out / table)
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in frame.to_pylist())


def test_a_standalone_cluster_gives_the_same_audit_as_local(spark_master, tmp_path):
    inputs = write_cases(tmp_path / "in", case_t, case_q)
    deliveries = deliveries_for_t(tmp_path / "deliveries.jsonl")
    env = _spark_env(tmp_path)
    cluster = reconcile(
        tmp_path / "cluster", inputs, deliveries, env,
        "--master", spark_master,
        "--conf", "spark.executor.memory=512m", "--conf", "spark.executor.cores=1",
        "--conf", "spark.cores.max=2", "--conf", "spark.driver.host=127.0.0.1",
    )  # fmt: skip
    assert cluster.returncode == 0, cluster.stderr[-3000:]

    summary = json.loads((tmp_path / "cluster" / "summary.json").read_text())
    assert summary == LOCAL_SUMMARY
    assert rows(tmp_path / "cluster", "replication_gap") and rows(
        tmp_path / "cluster", "observed_duplicates"
    ), "the tables are written where the driver named them"

    # the work ran on the workers: each executor left its directory under a worker's
    executors = list(tmp_path.parent.glob("spark-standalone*/work-*/app-*/*"))
    assert executors, "no executor ran on the standalone workers"
