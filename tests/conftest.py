"""Shared fixtures.

Metadata store: ``metadata_url`` is a fresh, empty database for each test, once per
backend: a SQLite file under ``tmp_path``, and a fresh schema on the PostgreSQL server
named by ``GEOREP_TEST_POSTGRES_URL`` (skipped when unset; start one with
``eval "$(bash .ci/postgres.sh | tail -1)"``). ``metadata_store`` is a migrated
``MetadataStore`` on it, driven by ``manual_clock``.

Two workers (``make test``: pytest-xdist, scheduled by ``pytest_xdist_make_scheduler``
below): each test file goes to one worker whole, so a module's processes start once;
every file under ``tests/pulsar`` goes to the same worker, which starts the session's two
Pulsar standalones once, and the container tests likewise share one worker and one image
build.
"""

from __future__ import annotations

import collections
import os
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings as hypothesis_settings
from sqlalchemy.engine import make_url

from georep.wan.toxiproxy import Toxiproxy, go_missing

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

POSTGRES_URL_ENV = "GEOREP_TEST_POSTGRES_URL"
METADATA_BACKENDS = ["sqlite", "postgresql"]

#: JVM options for every JVM the tests start (Spark's driver, daemons and executors, the
#: Pulsar standalones): each lives seconds to minutes on two cores that two workers share,
#: so the client compiler alone and the serial collector. The server compiler's threads
#: were most of a reconciliation's cost: tests/unit/test_reconcile_job.py took 194 CPU-s
#: with the defaults and 108 with these. A value already set is kept.
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: Spark SQL settings for every driver the tests start (a driver reads ``-Dspark.*`` into
#: its configuration; the tests' sessions and ``georep reconcile`` subprocesses alike):
#: expressions interpreted rather than compiled to Java (Janino), and the plan each
#: query logs described in one tree rather than the formatted form. The tests' inputs are
#: a few hundred rows, so compiling each query cost more than running it: the JVM of
#: tests/unit/test_reconcile_job.py's reconciliation used 66 CPU-s with the defaults and
#: 52 with these. Adaptive execution off: it runs each exchange of a query as a job of
#: its own and plans the rest of the query again (and describes the plan anew) after
#: each, which on inputs this small costs more than all it could save; the same
#: reconciliation ran 173 Spark jobs with it and 98 without, and a second one in the same
#: JVM used 50 CPU-s with it and 31-35 without. The results are the same either way
#: (Spark's interpreted and generated evaluation share one contract, and adaptive
#: execution changes how a plan runs, not what it computes); real runs, and bench/, keep
#: Spark's defaults.
SMALL_INPUT_SPARK_SQL = (
    "-Dspark.sql.codegen.wholeStage=false -Dspark.sql.codegen.factoryMode=NO_CODEGEN"
    " -Dspark.sql.ui.explainMode=simple -Dspark.sql.adaptive.enabled=false"
)
os.environ.setdefault("SPARK_SUBMIT_OPTS", f"{SHORT_LIVED_JVM} {SMALL_INPUT_SPARK_SQL}")
for _variable in ("SPARK_DAEMON_JAVA_OPTS", "PULSAR_EXTRA_OPTS"):
    os.environ.setdefault(_variable, SHORT_LIVED_JVM)

#: Hypothesis's default 200 ms deadline per example is a timing assertion: on two cores
#: beside the session's JVMs an example of tests/unit/test_subsync_ack_sync.py once took longer
#: and failed. Properties are about outcomes; how long they take is bench/'s business.
hypothesis_settings.register_profile("georep", deadline=None)
hypothesis_settings.load_profile("georep")


class ManualClock:
    """A clock that moves only when told: ``clock()`` reads it, ``advance(s)`` moves it."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


def mark_items_under(
    items: list[pytest.Item], directory: os.PathLike[str], *marks: pytest.MarkDecorator
) -> None:
    """Give every collected test under ``directory`` the ``marks`` (a conftest's
    ``pytest_collection_modifyitems``: a whole folder of one kind of test)."""
    root = os.path.abspath(directory)
    for item in items:
        if os.path.abspath(item.path).startswith(root + os.sep):
            for mark in marks:
                item.add_marker(mark)


@pytest.fixture(scope="session")
def toxiproxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toxiproxy]:
    """The emulated WAN (georep/wan/toxiproxy.py), one server per worker; each test makes
    its own links. Built with Go on first use; without Go the test is skipped, except in
    CI (``CI=true``), where that is a failure."""
    missing = go_missing()
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"WAN tests cannot run in CI: {missing}")
        pytest.skip(missing)
    log_file = tmp_path_factory.mktemp("toxiproxy") / "toxiproxy.log"
    with Toxiproxy.start(log_file) as server:
        yield server


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] Spark session (UI off, 4 shuffle partitions) per worker, started as
    ``georep reconcile`` starts its own (``job.start_spark``): a session's JVM takes
    about 10 s to start, and every module that reconciles in-process shares it. Each
    reconciliation clears its cached tables when it ends, so none sees another's."""
    pytest.importorskip("pyspark")
    from georep.spark_reconcile import job

    session = job.start_spark(
        master="local[2]",
        driver_memory_mib=1024,
        conf={"spark.sql.shuffle.partitions": "4"},
        log_level="ERROR",
    )
    yield session
    session.stop()


@pytest.fixture
def manual_clock() -> ManualClock:
    return ManualClock()


def postgres_url_or_skip() -> str:
    url = os.environ.get(POSTGRES_URL_ENV)
    if not url:
        pytest.skip(
            f"{POSTGRES_URL_ENV} is not set; for a local server run"
            ' eval "$(bash .ci/postgres.sh | tail -1)"'
        )
    return url


def fresh_metadata_url(backend: str, tmp_path: os.PathLike[str]) -> Iterator[str]:
    """Yield the URL of a new empty database of ``backend``; drop it afterwards."""
    if backend == "sqlite":
        yield f"sqlite:///{os.fspath(tmp_path)}/metadata.db"
        return
    import psycopg  # only the PostgreSQL cases need it

    base_url = postgres_url_or_skip()
    schema = f"georep_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base_url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    url = make_url(base_url).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with psycopg.connect(base_url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(params=METADATA_BACKENDS)
def metadata_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    yield from fresh_metadata_url(request.param, tmp_path)


@pytest.fixture
async def metadata_store(metadata_url: str, manual_clock: ManualClock) -> AsyncIterator:
    from georep.storage.meta.store import MetadataStore

    store = await MetadataStore.open(metadata_url, clock=manual_clock)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def broker_meta(metadata_store):
    """The broker's repositories (catalog, schemas) over ``metadata_store``'s engine."""
    from georep.broker.meta.store import BrokerRepositories

    return BrokerRepositories(metadata_store.engine)


@pytest.fixture
def gateway_meta(metadata_store):
    """The gateway's repositories (policies, members) over ``metadata_store``'s engine."""
    from georep.gateway.meta.store import GatewayRepositories

    return GatewayRepositories(metadata_store.engine)


#: Folders whose files share session fixtures too costly to start twice (JVMs, images).
_SHARED_WORKER = ("pulsar", "containers")
#: The Pulsar release in a test's id (``test_x[pulsar-3.0.7]``, ``[pulsar-4.0.7-kill]``).
_PULSAR_RELEASE = re.compile(r"\[(?:.*-)?pulsar-(\d+(?:\.\d+)+)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test its own id: schemathesis gives every API operation's test the id of the
    function, and the file scheduler below keys tests by id, so all but one would never
    run. The operation (the item's name) is put into the id."""
    seen = collections.Counter(item.nodeid for item in items)
    for item in items:
        if seen[item.nodeid] > 1 and item.parent is not None:
            _rename(item, f"{item.parent.nodeid}::{item.name}")
    unique = collections.Counter(item.nodeid for item in items)
    twice = [nodeid for nodeid, count in unique.items() if count > 1]
    if twice:
        raise pytest.UsageError(f"tests collected twice under one id: {twice[:5]}")


def _rename(item: pytest.Item, nodeid: str) -> None:
    """Give ``item`` the id ``nodeid`` (pytest keeps it privately: ``_id`` from 9.2 on,
    ``_nodeid`` before; the check above fails the run if neither took)."""
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:
        item._nodeid = nodeid  # type: ignore[attr-defined]  # pytest before 9.2
    else:
        item._id = coerce_node_id(nodeid)


@pytest.hookimpl(optionalhook=True)  # a run without xdist (-p no:xdist) does not know it
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Whole test files per worker, and a whole ``_SHARED_WORKER`` folder per worker: the
    scope of xdist's own load-by-file scheduling, with those folders as one scope each.
    (xdist's ``xdist_group`` marks do not group with the pytest this project runs.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ByFileAndSharedFolder(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            parts = path.split("/")
            if len(parts) > 2 and parts[0] == "tests" and parts[1] in _SHARED_WORKER:
                # One scope per Pulsar release (tests/pulsar/conftest.py), so that the
                # releases' passes may run on both workers at once.
                release = _PULSAR_RELEASE.search(nodeid)
                return parts[1] + (f"-{release.group(1)}" if release else "")
            return path

    return ByFileAndSharedFolder(config, log)
