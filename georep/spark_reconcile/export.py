"""``georep export``: one cluster's message index and subscription states, as Parquet.

For each topic partition that matches ``--topics`` (a glob over full names, e.g.
``'persistent://geo/orders/*'``; every topic by default) the export

1. reads every data message with the official pulsar-client ``Reader`` from the earliest
   position (markers are never dispatched, so the index holds data messages only), one
   row per message: its position (ledger, entry, batch index), its origin identity
   (``schema.py``), key, publish and event time, payload size, and its schema version
   with which schema that version is on this cluster (``payload_schema``: asked of the
   admin v2 ``GET /admin/v2/schemas/{tenant}/{namespace}/{topic}/schema/{version}``
   once per topic and version; null when the cluster holds no schema under it);
2. then takes each subscription's acknowledgement state at message precision, stamped
   ``captured_at``: one row per cursor with

   - its mark-delete position and individually deleted ranges, from Pulsar's admin v2
     ``GET /admin/v2/persistent/{tenant}/{namespace}/{topic}/internalStats`` (whole
     entries; every cursor, the gateway's and the broker's included);
   - the acknowledged indexes of its partly acknowledged batch entries (``batch_acks``),
     from the cluster's own ``GET /admin/georep/v1/persistent/{tenant}/{namespace}/
     {topic}/sync-state``, the state the subscription sync reads: per subscription,
     each batch entry above the mark-delete position and outside every range, its size
     and the indexes acknowledged (what the broker keeps from batch-index
     acknowledgements), at most ``limits.sync_state_batches_count_max`` entries (more
     are counted in the summary as ``batch_entries_truncated``).

   The sync-state is taken first and internalStats right after: acknowledgements only
   grow, so an entry the ranges now cover whole is dropped from ``batch_acks``, and the
   two agree except for indexes acknowledged in between. Taking them right after the
   read keeps acknowledgements and the index close in time; a range that reaches past
   the last message read simply matches nothing.

   **A real Pulsar cluster** has no ``sync-state``: its ``internalStats`` shows whole
   entries only (the cursor's batch-deleted indexes are not in it), so its export has
   empty ``batch_acks`` and says ``"batch_acks": "unavailable"`` in the summary; the
   reconciliation then counts a partly acknowledged batch as not acknowledged at all.

Rows go to a ``pyarrow.parquet.ParquetWriter`` in row groups of at most
``limits.export_row_group_rows_max`` rows, so memory stays bounded by one row group
whatever the size of the topics. Files are written under a hidden name and renamed when
complete: an interrupted export leaves no file a reconciliation would take for whole.

**Origin.** A message carrying ``georep.origin.cluster`` and ``georep.origin.position``
(``"ledger:entry"``) is a copy: its origin is those, with its own batch index. Any other
message was published here: its origin is this cluster and its own position. One case the
official client cannot show: a *batch* replicated by the gateway carries the origin
properties on the entry's metadata, and the client hands each message of a batch the
properties of its own batch header instead. Such a copy is recognised by its producer name
(``georep.repl.<origin cluster>``, docs/ARCHITECTURE.md "Replicator"). Its rows are set
aside in a hidden side file while the Reader goes on; when the partition is read, a second
pass streams the partition's entries as stored (the gateway's own protocol client,
``client/link.py``, on a non-durable subscription) in step with the side file,
both in position order, and takes each set-aside entry's origin from its metadata. Memory
stays bounded by a row group and the client's queue. A copy still unresolved after that
(its entry carries no origin) keeps its origin cluster and a null origin position, is
counted as ``unmapped``, and the reconciliation reports it apart rather than guess.

The admin token, if the cluster requires one, is the first of ``GEOREP_ADMIN_TOKENS``
(the variable every georep process reads: ``rest/tokens.py``), never a flag; it goes to
the admin REST and, as Pulsar's token authentication, to the brokers. A cluster reached
over TLS (``https://`` and ``pulsar+ssl://`` URLs) is verified against
``--tls-trust-certs-file`` (default: the system's CAs) and its host name, as the gateway
verifies it (``client/tls.py``); nothing is sent in plaintext to a TLS URL. The
summary is one JSON line on stdout; progress lines go to stderr.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from georep import limits
from georep.client.tls import ClientTls, TlsSettingsError, uses_tls
from georep.domain.position import Position
from georep.pulsar_text.cursor import parse_cursor, parse_position
from georep.pulsar_text.schema_version import version_number
from georep.rest.tokens import ADMIN_TOKENS_ENV, TokenError, client_token
from georep.runtime.awaiting import within
from georep.spark_reconcile import schema
from georep.spark_reconcile.errors import ExportError

if TYPE_CHECKING:
    from georep.client.link import PulsarLink

ORIGIN_CLUSTER_PROPERTY = "georep.origin.cluster"
ORIGIN_POSITION_PROPERTY = "georep.origin.position"
REPLICATION_PRODUCER_PREFIX = "georep.repl."
TOKEN_ENV = ADMIN_TOKENS_ENV
ADMIN_TIMEOUT_S = 30.0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cluster-admin",
        required=True,
        metavar="URL",
        help="the cluster's admin REST, e.g. http://127.0.0.1:8080",
    )
    parser.add_argument(
        "--service-url",
        required=True,
        metavar="URL",
        help="the cluster's broker, e.g. pulsar://127.0.0.1:6650",
    )
    parser.add_argument(
        "--topics",
        default="*",
        metavar="PATTERN",
        help="glob over full topic names (default: every topic)",
    )
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="DIR",
        help="export directory (messages/ and subscriptions/ under it)",
    )
    parser.add_argument(
        "--cluster",
        default=None,
        metavar="NAME",
        help="cluster name (default: asked from the admin REST)",
    )
    parser.add_argument(
        "--tls-trust-certs-file",
        type=Path,
        default=None,
        metavar="PEM",
        help="the CA a TLS cluster's certificates chain to (default: the system's CAs)",
    )
    parser.add_argument("--progress-interval", type=float,
                        default=limits.export_progress_interval_s_default, metavar="S",
                        help="seconds between progress lines on stderr (0: none)")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    try:
        summary = export(
            admin_url=args.cluster_admin,
            service_url=args.service_url,
            out=args.out,
            pattern=args.topics,
            cluster=args.cluster,
            progress_interval_s=args.progress_interval,
            tls=ClientTls(trust_certs_file=args.tls_trust_certs_file),
        )
    except ExportError as error:
        print(f"georep export: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # the output directory or a file in it
        print(f"georep export: error: cannot write under {args.out}: {error}", file=sys.stderr)
        return 2
    print(json.dumps(summary, sort_keys=True))
    return 0


# --- admin REST ---------------------------------------------------------------------
class AdminClient:
    """The few GETs of the Pulsar admin v2 REST the export needs (blocking, urllib)."""

    def __init__(
        self, base_url: str, token: str | None = None, context: ssl.SSLContext | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._context = context
        self._headers = {"Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"

    def get(self, path: str) -> Any:
        url = self.base_url + path
        request = urllib.request.Request(url, headers=self._headers)
        try:
            with urllib.request.urlopen(
                request, timeout=ADMIN_TIMEOUT_S, context=self._context
            ) as answer:
                body = answer.read(limits.export_admin_answer_bytes_max + 1)
        except urllib.error.HTTPError as error:
            if error.code == 404:
                raise _NotFound(f"admin REST {url}: HTTP 404 {error.reason}") from None
            raise ExportError(f"admin REST {url}: HTTP {error.code} {error.reason}") from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise ExportError(f"admin REST {url} unreachable: {reason}") from None
        if len(body) > limits.export_admin_answer_bytes_max:
            raise ExportError(
                f"admin REST {url}: answer over {limits.export_admin_answer_bytes_max} bytes"
            )
        try:
            return json.loads(body)
        except ValueError:
            raise ExportError(f"admin REST {url}: answer is not JSON") from None

    def cluster_name(self) -> str:
        names = self.get("/admin/v2/clusters")
        if not isinstance(names, list) or len(names) != 1:
            raise ExportError(f"the admin REST lists clusters {names!r}; name one with --cluster")
        return str(names[0])

    def topic_partitions(self) -> Iterator[str]:
        """Every persistent topic partition (and non-partitioned topic), by full name."""
        for tenant in self._names("/admin/v2/tenants"):
            for namespace in self._names(f"/admin/v2/namespaces/{_quote(tenant)}"):
                tenant_part, _, local = namespace.partition("/")
                yield from self._names(
                    f"/admin/v2/persistent/{_quote(tenant_part)}/{_quote(local)}"
                )

    def internal_stats(self, partition_name: str) -> dict[str, Any]:
        stats = self.get(f"/admin/v2/persistent/{_topic_path(partition_name)}/internalStats")
        if not isinstance(stats, dict):
            raise ExportError(f"internalStats of {partition_name} is not an object")
        return stats

    def sync_state(self, partition_name: str) -> dict[str, Any] | None:
        """georep's ``sync-state`` of one topic partition; None where the cluster has no
        such call (a real Pulsar cluster answers 404 for the path)."""
        path = f"/admin/georep/v1/persistent/{_topic_path(partition_name)}/sync-state"
        try:
            state = self.get(path)
        except _NotFound:
            return None
        if not isinstance(state, dict) or not isinstance(state.get("subscriptions"), dict):
            raise ExportError(f"sync-state of {partition_name} is not a sync-state document")
        return state

    def _names(self, path: str) -> list[str]:
        names = self.get(path)
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ExportError(f"admin REST {path}: expected a list of names")
        return names

    def payload_schema(self, topic: str, version: int) -> str | None:
        """``schema.schema_fingerprint`` of ``topic``'s schema under ``version`` on this
        cluster (``topic``: the base name, whose partitions share the history); None
        when it holds none under that version."""
        path = f"/admin/v2/schemas/{_topic_path(topic)}/schema/{version}"
        try:
            answer = self.get(path)
        except _NotFound:
            return None
        if not isinstance(answer, dict) or not isinstance(answer.get("data"), str):
            raise ExportError(f"admin REST {path}: not a schema")
        return schema.schema_fingerprint(str(answer.get("type")), answer["data"])


class PayloadSchemas:
    """The fingerprint of each schema version met while reading one topic, asked once
    (:meth:`AdminClient.payload_schema`); forgotten when the next topic begins, so it
    holds one topic's versions at most (``limits.schema_versions_per_topic_max``)."""

    def __init__(self, admin: AdminClient) -> None:
        self._admin = admin
        self._topic = ""
        self._known: dict[int, str | None] = {}

    def of(self, topic: str, version: int) -> str | None:
        if topic != self._topic:
            self._topic, self._known = topic, {}
        if version not in self._known:
            self._known[version] = self._admin.payload_schema(topic, version)
        return self._known[version]


class _NotFound(ExportError):
    """HTTP 404 from the admin REST."""


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _topic_path(partition_name: str) -> str:
    """``persistent://t/ns/x`` -> ``t/ns/x``, each part quoted."""
    tenant, namespace, local = partition_name.removeprefix("persistent://").split("/", 2)
    return f"{_quote(tenant)}/{_quote(namespace)}/{_quote(local)}"


# --- rows ---------------------------------------------------------------------------
@dataclass
class Origin:
    cluster: str
    ledger_id: int | None
    entry_id: int | None


def origin_of(
    properties: dict[str, str], producer_name: str, cluster: str, ledger_id: int, entry_id: int
) -> Origin:
    """The origin of one message as the client shows it (see the module docstring).

    >>> origin_of({"georep.origin.cluster": "A", "georep.origin.position": "7:5"}, "p", "B", 3, 1)
    Origin(cluster='A', ledger_id=7, entry_id=5)
    >>> origin_of({}, "georep.repl.A", "B", 3, 1)
    Origin(cluster='A', ledger_id=None, entry_id=None)
    >>> origin_of({}, "app-1", "B", 3, 1)
    Origin(cluster='B', ledger_id=3, entry_id=1)
    """
    origin_cluster = properties.get(ORIGIN_CLUSTER_PROPERTY)
    origin_position = properties.get(ORIGIN_POSITION_PROPERTY)
    if origin_cluster and origin_position:
        try:
            origin_ledger, origin_entry = parse_position(origin_position)
        except ValueError:
            return Origin(origin_cluster, None, None)
        return Origin(origin_cluster, origin_ledger, origin_entry)
    if producer_name.startswith(REPLICATION_PRODUCER_PREFIX):
        return Origin(producer_name.removeprefix(REPLICATION_PRODUCER_PREFIX), None, None)
    return Origin(cluster, ledger_id, entry_id)


@dataclass
class RowBuffer:
    """Rows of one table, column by column, flushed to a ParquetWriter as row groups."""

    table_schema: pa.Schema
    writer: pq.ParquetWriter
    columns: dict[str, list[Any]] = field(default_factory=dict)
    rows: int = 0
    written: int = 0

    def __post_init__(self) -> None:
        self.columns = {name: [] for name in self.table_schema.names}

    def append(self, row: dict[str, Any]) -> None:
        for name, values in self.columns.items():
            values.append(row[name])
        self.rows += 1
        if self.rows >= limits.export_row_group_rows_max:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        batch = pa.RecordBatch.from_pydict(self.columns, schema=self.table_schema)
        self.writer.write_batch(batch, row_group_size=limits.export_row_group_rows_max)
        self.written += self.rows
        self.columns = {name: [] for name in self.table_schema.names}
        self.rows = 0


class TableFile:
    """One Parquet file written under a hidden name, renamed into place on ``commit``."""

    def __init__(self, directory: Path, table: str, cluster: str, *, name: str = "") -> None:
        self.final = directory / table / f"{name or _file_name(cluster)}.parquet"
        self.partial = self.final.with_name(f".{self.final.name}.partial")
        self.final.parent.mkdir(parents=True, exist_ok=True)
        table_schema = schema.SCHEMAS[table]
        self.writer = pq.ParquetWriter(self.partial, table_schema, compression="zstd")
        self.buffer = RowBuffer(table_schema, self.writer)

    def commit(self) -> int:
        self.buffer.flush()
        self.writer.close()
        os.replace(self.partial, self.final)
        return self.buffer.written

    def abandon(self) -> None:
        self.writer.close()
        self.partial.unlink(missing_ok=True)


def _file_name(cluster: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in cluster) or "cluster"


class Progress:
    """A line on stderr at most every ``interval_s`` seconds."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.started = time.monotonic()
        self.last = self.started

    def tick(self, text: str, messages: int) -> None:
        if self.interval_s <= 0:
            return
        now = time.monotonic()
        if now - self.last >= self.interval_s:
            self.last = now
            rate = messages / max(now - self.started, 1e-9)
            print(f"export: {messages} messages ({rate:.0f}/s); {text}", file=sys.stderr)


# --- the export ---------------------------------------------------------------------
def export(
    *,
    admin_url: str,
    service_url: str,
    out: Path,
    pattern: str = "*",
    cluster: str | None = None,
    progress_interval_s: float = limits.export_progress_interval_s_default,
    tls: ClientTls | None = None,
) -> dict[str, Any]:
    import pulsar  # the official client; imported here so `georep --help` stays light

    from georep.client.link import PulsarLink

    try:
        token = client_token(os.environ, TOKEN_ENV)
    except TokenError as error:
        raise ExportError(f"{TOKEN_ENV}: {error}") from None
    tls = tls or ClientTls()
    try:
        context = tls.context() if uses_tls(admin_url) or uses_tls(service_url) else None
    except TlsSettingsError as error:
        raise ExportError(str(error)) from None
    admin = AdminClient(admin_url, token, context)
    cluster = cluster or admin.cluster_name()
    partitions = sorted(
        name
        for name in admin.topic_partitions()
        if fnmatch.fnmatchcase(name, pattern)
        or fnmatch.fnmatchcase(schema.split_partition(name)[0], pattern)
    )
    if not partitions:
        raise ExportError(f"no topic of cluster {cluster} matches {pattern!r}")
    if len(partitions) > limits.export_topics_count_max:
        raise ExportError(
            f"{len(partitions)} topic partitions match {pattern!r}; at most "
            f"{limits.export_topics_count_max} per export (narrow --topics)"
        )

    messages = TableFile(out, schema.MESSAGES, cluster)
    subscriptions = TableFile(out, schema.SUBSCRIPTIONS, cluster)
    progress = Progress(progress_interval_s)
    payload_schemas = PayloadSchemas(admin)
    counts = dict.fromkeys(
        ("messages", "unmapped", "resolved", "subscriptions", "batch_entries",
         "batch_entries_truncated", "batch_state_missing"),
        0,
    )  # fmt: skip
    try:
        client = pulsar.Client(
            service_url,
            operation_timeout_seconds=30,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
            authentication=pulsar.AuthenticationToken(token) if token else None,
            tls_trust_certs_file_path=str(tls.trust_certs_file) if tls.trust_certs_file else None,
            tls_validate_hostname=tls.hostname_verification,
        )
    except Exception as error:  # the client raises its own types for a bad URL
        messages.abandon()
        subscriptions.abandon()
        raise ExportError(f"cannot open a client on {service_url}: {error}") from None
    try:
        for name in partitions:
            set_aside = TableFile(out, schema.MESSAGES, cluster, name=f"{_file_name(cluster)}.side")
            try:
                _read_partition(
                    pulsar, client, name, cluster, messages.buffer, set_aside.buffer, counts,
                    progress, payload_schemas,
                )  # fmt: skip
                set_aside.buffer.flush()
                set_aside.writer.close()
                if set_aside.buffer.written:
                    _resolve_set_aside(PulsarLink(service_url, token=token, ssl_context=context),
                                       name, set_aside.partial, messages.buffer,
                                       counts)  # fmt: skip
            finally:
                set_aside.partial.unlink(missing_ok=True)
            _capture_subscriptions(admin, name, cluster, subscriptions.buffer, counts)
        written = messages.commit(), subscriptions.commit()
    except BaseException:
        messages.abandon()
        subscriptions.abandon()
        raise
    finally:
        client.close()
    return {
        "cluster": cluster,
        "topic_partitions": len(partitions),
        "messages": written[0],
        "subscriptions": written[1],
        "unmapped_copies": counts["unmapped"],
        "copies_resolved_from_entries": counts["resolved"],
        "batch_acks": "unavailable" if counts["batch_state_missing"] else "sync-state",
        "batch_entries_partly_acknowledged": counts["batch_entries"],
        "batch_entries_truncated": counts["batch_entries_truncated"],
        "out": str(out),
        "schema_version": schema.SCHEMA_VERSION,
    }


def _read_partition(
    pulsar: Any,
    client: Any,
    name: str,
    cluster: str,
    rows: RowBuffer,
    set_aside: RowBuffer,
    counts: dict[str, int],
    progress: Progress,
    payload_schemas: PayloadSchemas,
) -> None:
    """Every message of one topic partition into ``rows``; those whose origin position
    the client does not show into ``set_aside`` (see the module docstring)."""
    topic, partition = schema.split_partition(name)
    try:
        reader = client.create_reader(
            name,
            pulsar.MessageId.earliest,
            receiver_queue_size=limits.export_receiver_queue_messages_max,
        )
    except pulsar.PulsarException as error:
        raise ExportError(f"cannot read {name}: {error}") from None
    try:
        while reader.has_message_available():
            message = reader.read_next(timeout_millis=limits.export_read_timeout_ms_max)
            message_id = message.message_id()
            ledger_id, entry_id = message_id.ledger_id(), message_id.entry_id()
            origin = origin_of(
                message.properties(), message.producer_name(), cluster, ledger_id, entry_id
            )
            event_ms = message.event_timestamp()
            version = version_number(message.schema_version())
            (rows if origin.ledger_id is not None else set_aside).append(
                {
                    "schema_version": schema.SCHEMA_VERSION,
                    "cluster": cluster,
                    "topic": topic,
                    "partition": partition,
                    "ledger_id": ledger_id,
                    "entry_id": entry_id,
                    "batch_index": message_id.batch_index(),
                    "origin_cluster": origin.cluster,
                    "origin_ledger_id": origin.ledger_id,
                    "origin_entry_id": origin.entry_id,
                    "key": message.partition_key() or None,
                    "publish_time": message.publish_timestamp(),
                    "event_time": event_ms or None,
                    "size": len(message.data()),
                    "payload_schema_version": version,
                    "payload_schema": None
                    if version is None
                    else payload_schemas.of(topic, version),
                }
            )
            counts["messages"] += 1
            progress.tick(name, counts["messages"])
    except pulsar.PulsarException as error:
        raise ExportError(f"reading {name} failed: {error}") from None
    finally:
        reader.close()


def _capture_subscriptions(
    admin: AdminClient, name: str, cluster: str, rows: RowBuffer, counts: dict[str, int]
) -> None:
    topic, partition = schema.split_partition(name)
    sync_state = admin.sync_state(name)  # first: see the module docstring
    stats = admin.internal_stats(name)
    captured_at = int(time.time() * 1000)
    if sync_state is None:
        counts["batch_state_missing"] += 1
    batches = sync_state["subscriptions"] if sync_state is not None else {}
    cursors = stats.get("cursors") or {}
    if not isinstance(cursors, dict):
        raise ExportError(f"internalStats of {name}: cursors is not an object")
    for subscription, cursor in sorted(cursors.items()):
        try:
            mark_delete, ranges = parse_cursor(cursor)
            batch_acks, truncated = batch_acks_of(batches.get(subscription), mark_delete, ranges)
        except (KeyError, TypeError, ValueError) as error:
            raise ExportError(
                f"internalStats / sync-state of {name}, cursor {subscription!r}: {error}"
            ) from None
        counts["batch_entries"] += len(batch_acks)
        counts["batch_entries_truncated"] += truncated
        rows.append(
            {
                "schema_version": schema.SCHEMA_VERSION,
                "cluster": cluster,
                "topic": topic,
                "partition": partition,
                "subscription": subscription,
                "mark_delete_ledger_id": mark_delete[0],
                "mark_delete_entry_id": mark_delete[1],
                "individually_deleted": [
                    {
                        "lower_ledger_id": lower[0],
                        "lower_entry_id": lower[1],
                        "upper_ledger_id": upper[0],
                        "upper_entry_id": upper[1],
                    }
                    for lower, upper in ranges
                ],
                "batch_acks": batch_acks,
                "captured_at": captured_at,
            }
        )
        counts["subscriptions"] += 1


def batch_acks_of(
    state: dict[str, Any] | None,
    mark_delete: Position,
    ranges: list[tuple[Position, Position]],
) -> tuple[list[dict[str, Any]], int]:
    """The ``batch_acks`` column of one subscription from its sync-state document (None:
    none), leaving out entries the mark-delete position or a range ``(lower, upper]``
    holds whole; and how many more entries the cluster did not list (0 or 1: "more").

    >>> state = {"batches": [{"ledgerId": 3, "entryId": 4, "batchSize": 5, "ackedIndexes": [0, 2]},
    ...                      {"ledgerId": 3, "entryId": 7, "batchSize": 2, "ackedIndexes": [1]}]}
    >>> batch_acks_of(state, (3, 1), [((3, 6), (3, 7))])
    ([{'ledger_id': 3, 'entry_id': 4, 'batch_size': 5, 'acked_indexes': [0, 2]}], 0)
    """
    if state is None:
        return [], 0
    acks = []
    for batch in state.get("batches") or []:
        position = (int(batch["ledgerId"]), int(batch["entryId"]))
        size = int(batch["batchSize"])
        indexes = sorted({int(i) for i in batch["ackedIndexes"]})
        if indexes and not 0 <= indexes[0] <= indexes[-1] < size:
            raise ValueError(f"batch {position}: indexes {indexes} outside a batch of {size}")
        if position <= mark_delete or any(low < position <= high for low, high in ranges):
            continue  # acknowledged whole since the sync-state was taken
        acks.append(
            {"ledger_id": position[0], "entry_id": position[1], "batch_size": size,
             "acked_indexes": indexes}
        )  # fmt: skip
    return acks, int(bool(state.get("batchesTruncated")))


def _resolve_set_aside(
    link: PulsarLink, name: str, side_file: Path, rows: RowBuffer, counts: dict[str, int]
) -> None:
    """Fill the origin of the set-aside rows (position order) from the entries' metadata,
    read in the same order, and append them to ``rows``."""
    import asyncio

    from georep.replicator.origin import origin_of as entry_origin_of

    loop = asyncio.new_event_loop()
    try:
        consumer = loop.run_until_complete(
            link.subscribe(name, f"georep-export-{os.getpid()}-{time.monotonic_ns()}",
                           durable=False)
        )  # fmt: skip
        current: tuple[Position, Any] | None = None
        exhausted = False
        side = pq.ParquetFile(side_file)
        for batch in side.iter_batches(batch_size=limits.export_row_group_rows_max):
            for row in batch.to_pylist():
                position = Position(row["ledger_id"], row["entry_id"])
                while not exhausted and (current is None or current[0] < position):
                    try:
                        entry = loop.run_until_complete(
                            within(consumer.receive(), limits.export_read_timeout_ms_max / 1000)
                        )
                    except TimeoutError:
                        exhausted = True
                        break
                    current = (entry.position, entry_origin_of(entry.metadata))
                origin = current[1] if current is not None and current[0] == position else None
                if origin is not None:
                    row["origin_cluster"] = origin.cluster
                    row["origin_ledger_id"] = origin.ledger_id
                    row["origin_entry_id"] = origin.entry_id
                    counts["resolved"] += 1
                else:
                    counts["unmapped"] += 1
                rows.append(row)
    except Exception as error:  # the link raises its own types; any of them ends the export
        raise ExportError(f"reading the entries of {name} failed: {error}") from None
    finally:
        loop.run_until_complete(link.close())
        loop.close()
