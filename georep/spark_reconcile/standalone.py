"""A Spark standalone cluster on this machine, from the installed pyspark: one master and
N workers started with ``spark-class`` (``org.apache.spark.deploy.master.Master`` /
``...worker.Worker``), all on 127.0.0.1 with ephemeral ports, stopped together.

What ``tests/integration/test_reconcile_spark_cluster.py`` and ``bench/reconcile.py
--cluster`` run ``georep reconcile --master spark://…`` against (docs/AUDIT.md, "On a
Spark cluster"). It needs only Java 17+ and the Spark extra; every file (logs, the
workers' directories, Spark's scratch space) goes under the directory it is given::

    with standalone.cluster(root, workers=2, worker_cores=1, worker_memory_mib=1024) as c:
        ... georep reconcile --master c.url, in the environment standalone.spark_env(root)
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
_MASTER_URL = r"Starting Spark master at (spark://127\.0\.0\.1:\d+)"
_MASTER_UI = r"MasterWebUI.* at (http://[\w.\-]+:\d+)"
_REGISTERED = r"Registering worker 127\.0\.0\.1:\d+"


class StandaloneError(RuntimeError):
    """A master or worker exited, or did not come up in time; the message ends with the
    tail of its log."""


def spark_home() -> Path:
    """The installed pyspark's directory: a ``SPARK_HOME`` (``bin/spark-class``, jars)."""
    import pyspark

    return Path(pyspark.__file__).parent


def spark_env(root: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for Spark processes on loopback: ``base`` (default: this
    process's) with ``SPARK_HOME``, ``SPARK_LOCAL_IP=127.0.0.1`` (every service and UI
    bound there), scratch space and logs under ``root``, and this interpreter as the
    executors' Python."""
    return {
        **(os.environ if base is None else base),
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(root / "local"),
        "SPARK_LOG_DIR": str(root / "logs"),
        # the executors' Python, should the job ever need one: this interpreter's
        "PYSPARK_PYTHON": sys.executable,
    }


@dataclass
class StandaloneCluster:
    """A running master and its workers. ``url`` is the master's ``spark://`` URL,
    ``ui`` its web UI; executors leave their directories under ``work_dirs``."""

    root: Path
    url: str
    ui: str | None
    workers: int
    worker_cores: int
    worker_memory_mib: int
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def work_dirs(self) -> list[Path]:
        return [self.root / f"work-{n}" for n in range(self.workers)]

    def stop(self) -> None:
        """Stop every process (its whole process group): SIGTERM, then SIGKILL after
        STOP_TIMEOUT_S."""
        _stop(self.processes)


def start(
    root: Path,
    *,
    workers: int = 2,
    worker_cores: int = 1,
    worker_memory_mib: int = 1024,
    timeout_s: float = START_TIMEOUT_S,
) -> StandaloneCluster:
    """Start a master and ``workers`` workers (each offering ``worker_cores`` cores and
    ``worker_memory_mib`` MiB to executors) and return once every worker registered.
    Raises StandaloneError, having stopped what it started, if one does not come up."""
    root.mkdir(parents=True, exist_ok=True)
    env = spark_env(root)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        master_log = root / "master.log"
        master = _spawn(
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", "0", "--webui-port", "0"],
            master_log, env,
        )  # fmt: skip
        processes.append(master)
        deadline = time.monotonic() + timeout_s
        [url] = _wait_for(master_log, _MASTER_URL, 1, master, deadline)
        for n in range(workers):
            worker = [
                "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port", "0",
                "--webui-port", "0", "--cores", str(worker_cores),
                "--memory", f"{worker_memory_mib}m", "--work-dir", str(root / f"work-{n}"), url,
            ]  # fmt: skip
            processes.append(_spawn(worker, root / f"worker-{n}.log", env))
        _wait_for(master_log, _REGISTERED, workers, master, deadline)
        ui = re.findall(_MASTER_UI, master_log.read_text(errors="replace"))
    except BaseException:
        _stop(processes)
        raise
    return StandaloneCluster(
        root=root,
        url=url,
        ui=ui[0] if ui else None,
        workers=workers,
        worker_cores=worker_cores,
        worker_memory_mib=worker_memory_mib,
        processes=processes,
    )


@contextmanager
def cluster(
    root: Path,
    *,
    workers: int = 2,
    worker_cores: int = 1,
    worker_memory_mib: int = 1024,
    timeout_s: float = START_TIMEOUT_S,
) -> Iterator[StandaloneCluster]:
    """``start``, then stop every process on leaving."""
    running = start(
        root,
        workers=workers,
        worker_cores=worker_cores,
        worker_memory_mib=worker_memory_mib,
        timeout_s=timeout_s,
    )
    try:
        yield running
    finally:
        running.stop()


def _spawn(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: stopped whole
        )


def _wait_for(
    path: Path, pattern: str, count: int, process: subprocess.Popen[bytes], deadline: float
) -> list[str]:
    """The first ``count`` matches of ``pattern`` in the log at ``path``; raises
    StandaloneError if the process exits or the deadline passes first."""
    while time.monotonic() < deadline:
        found = re.findall(pattern, path.read_text(errors="replace"))
        if len(found) >= count:
            return found[:count]
        if process.poll() is not None:
            break
        time.sleep(0.5)
    tail = path.read_text(errors="replace")[-3000:]
    raise StandaloneError(f"Spark standalone: no {pattern!r} x{count} in {path}:\n{tail}")


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            _signal(process, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _signal(process, signal.SIGKILL)
            process.wait()


def _signal(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:  # the group exited in between
        pass
