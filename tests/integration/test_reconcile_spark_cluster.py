"""``georep reconcile --master spark://…`` on a real Spark standalone cluster: a master
and two workers started from the installed pyspark (``spark-class``), all on 127.0.0.1
with ephemeral ports, once for the session (``georep/spark_reconcile/standalone.py``,
which ``bench/reconcile.py --cluster`` starts too). Small exports (and a delivery log) whose
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
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from georep.spark_reconcile import standalone
from tests.conftest import SHORT_LIVED_JVM
from tests.unit.test_reconcile_job import case_q, case_t, deliveries_for_t, write_cases

pyspark = pytest.importorskip("pyspark")
pq = pytest.importorskip("pyarrow.parquet")

#: Two cold starts of the command (a JVM each) and a cluster's start: minutes on a
#: loaded machine, whatever the few rows.
pytestmark = [pytest.mark.timeout(900), pytest.mark.slow]

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
    "undecodable_copies": 0,
    "unmapped_copies": 0,
}


@pytest.fixture(scope="session")
def spark_master(tmp_path_factory) -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a master with two registered workers (1 core, 1 GiB
    each); every process stopped at the end of the session."""
    root = tmp_path_factory.mktemp("spark-standalone")
    with standalone.cluster(
        root, workers=WORKERS, worker_cores=1, worker_memory_mib=1024, timeout_s=START_TIMEOUT_S
    ) as cluster:
        yield cluster.url


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
    env = standalone.spark_env(tmp_path)
    cluster = reconcile(
        tmp_path / "cluster", inputs, deliveries, env,
        "--master", spark_master,
        "--conf", "spark.executor.memory=512m", "--conf", "spark.executor.cores=1",
        "--conf", "spark.cores.max=2", "--conf", "spark.driver.host=127.0.0.1",
        "--conf", f"spark.executor.extraJavaOptions={SHORT_LIVED_JVM}",
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
