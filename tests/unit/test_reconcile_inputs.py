"""The reconciliation's input checks, the export's row handling and the report page,
without Spark: bad input is refused from the Parquet footers, with a message naming the
file, and ``georep reconcile`` exits non-zero without a stack trace."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from georep import cli, limits
from georep.pulsar_text.cursor import parse_position, parse_ranges
from georep.spark_reconcile import export, report, schema
from georep.spark_reconcile.errors import InputError
from georep.spark_reconcile.inputs import check_exports

NOW = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def message_row(**changes) -> dict:
    row = {
        "schema_version": schema.SCHEMA_VERSION, "cluster": "A", "topic": "persistent://t/n/x",
        "partition": -1, "ledger_id": 1, "entry_id": 0, "batch_index": -1, "origin_cluster": "A",
        "origin_ledger_id": 1, "origin_entry_id": 0, "key": None, "publish_time": NOW,
        "event_time": None, "size": 1, "payload_schema_version": None, "payload_schema": None,
    }  # fmt: skip
    row.update(changes)
    return row


def write(root: Path, cluster: str, *, messages=None, message_schema=None, subscriptions=(),
          subscription_schema=None):  # fmt: skip
    """An export directory of one cluster (by default one message, no subscription)."""
    table_schema = message_schema or schema.MESSAGES_SCHEMA
    rows = [message_row(cluster=cluster)] if messages is None else messages
    (root / cluster / "messages").mkdir(parents=True, exist_ok=True)
    (root / cluster / "subscriptions").mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.Table.from_pylist(rows, schema=table_schema),
        root / cluster / "messages" / f"{cluster}.parquet",
    )
    pq.write_table(
        pa.Table.from_pylist(
            list(subscriptions), schema=subscription_schema or schema.SUBSCRIPTIONS_SCHEMA
        ),
        root / cluster / "subscriptions" / f"{cluster}.parquet",
    )
    return str(root / cluster)


def with_version(version: int, table_schema: pa.Schema = schema.MESSAGES_SCHEMA) -> pa.Schema:
    metadata = dict(table_schema.metadata)
    metadata[schema.VERSION_KEY] = str(version).encode()
    return table_schema.with_metadata(metadata)


def test_good_exports_pass(tmp_path) -> None:
    checked = check_exports([write(tmp_path, "A"), write(tmp_path, "B")])
    assert checked.rows == {"messages": 2, "subscriptions": 0}
    assert [Path(f).name for f in checked.files["messages"]] == ["A.parquet", "B.parquet"]


def test_missing_column_is_named(tmp_path) -> None:
    narrow = schema.MESSAGES_SCHEMA.remove(schema.MESSAGES_SCHEMA.get_field_index("batch_index"))
    row = message_row()
    del row["batch_index"]
    directory = write(tmp_path, "A", messages=[row], message_schema=narrow)
    with pytest.raises(InputError, match=r"A\.parquet: missing column\(s\) batch_index"):
        check_exports([directory])


def test_column_of_another_type_is_refused(tmp_path) -> None:
    index = schema.MESSAGES_SCHEMA.get_field_index("ledger_id")
    wrong = schema.MESSAGES_SCHEMA.set(index, pa.field("ledger_id", pa.string()))
    directory = write(tmp_path, "A", messages=[message_row(ledger_id="1")], message_schema=wrong)
    with pytest.raises(InputError, match=r"column ledger_id is string; .* needs int64"):
        check_exports([directory])


def test_wrong_version_is_refused(tmp_path) -> None:
    directory = write(tmp_path, "A", message_schema=with_version(4))
    with pytest.raises(InputError, match=r"schema version 4 in .*reads versions 1, 2 and 3"):
        check_exports([directory])


def test_mixed_versions_are_refused(tmp_path) -> None:
    directories = [write(tmp_path, "A"), write(tmp_path, "B", message_schema=with_version(4))]
    with pytest.raises(InputError, match=r"schema version 4 in .*B.*the inputs mix versions 3, 4"):
        check_exports(directories)


def test_version_1_exports_read_without_batch_indexes(tmp_path) -> None:
    """A version 1 subscriptions file has no batch_acks: it passes the checks (and is read
    at entry precision); a version 2 file without the column is refused."""
    index = schema.SUBSCRIPTIONS_SCHEMA.get_field_index("batch_acks")
    version_1 = with_version(1, schema.SUBSCRIPTIONS_SCHEMA.remove(index))
    row = {"schema_version": 1, "cluster": "A", "topic": "persistent://t/n/x", "partition": -1,
           "subscription": "s", "mark_delete_ledger_id": 1, "mark_delete_entry_id": 0,
           "individually_deleted": [], "captured_at": NOW}  # fmt: skip
    directory = write(tmp_path / "v1", "A", messages=[message_row(schema_version=1)],
                      message_schema=with_version(1), subscriptions=[row],
                      subscription_schema=version_1)  # fmt: skip
    assert check_exports([directory]).rows == {"messages": 1, "subscriptions": 1}
    unversioned = write(tmp_path / "v2", "A", subscriptions=[{**row, "schema_version": 2}],
                        subscription_schema=with_version(2, version_1))  # fmt: skip
    with pytest.raises(InputError, match=r"missing column\(s\) batch_acks"):
        check_exports([unversioned])


def test_version_2_exports_read_without_payload_schemas(tmp_path) -> None:
    """A version 2 messages file has no payload schema columns: it passes the checks (and
    compares no schema); a version 3 file without them is refused."""
    added = ("payload_schema_version", "payload_schema")
    narrow = schema.MESSAGES_SCHEMA
    for name in added:
        narrow = narrow.remove(narrow.get_field_index(name))
    row = {k: v for k, v in message_row(schema_version=2).items() if k not in added}
    directory = write(tmp_path / "v2", "A", messages=[row], message_schema=with_version(2, narrow))
    assert check_exports([directory]).rows == {"messages": 1, "subscriptions": 0}
    current = write(tmp_path / "v3", "A", messages=[{**row, "schema_version": 3}],
                    message_schema=with_version(3, narrow))  # fmt: skip
    with pytest.raises(InputError, match=r"missing column\(s\) payload_schema_version, payload"):
        check_exports([current])


def test_version_from_the_column_when_the_footer_has_none(tmp_path) -> None:
    bare = schema.MESSAGES_SCHEMA.with_metadata({})
    directory = write(tmp_path, "A", messages=[message_row(schema_version=4)], message_schema=bare)
    with pytest.raises(InputError, match="schema version 4"):
        check_exports([directory])


def test_empty_directory_and_empty_input(tmp_path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no messages/ directory"):
        check_exports([str(tmp_path / "empty")])
    (tmp_path / "empty" / "messages").mkdir()
    (tmp_path / "empty" / "subscriptions").mkdir()
    with pytest.raises(InputError, match="no Parquet files under"):
        check_exports([str(tmp_path / "empty")])
    with pytest.raises(InputError, match="the inputs hold no messages"):
        check_exports([write(tmp_path, "A", messages=[])])
    with pytest.raises(InputError, match="no such directory"):
        check_exports([str(tmp_path / "absent")])


def test_unreadable_file_is_named(tmp_path) -> None:
    directory = write(tmp_path, "A")
    Path(directory, "messages", "A.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(InputError, match=r"cannot read .*A\.parquet"):
        check_exports([directory])


def test_a_table_in_the_wrong_directory_is_refused(tmp_path) -> None:
    directory = write(tmp_path, "A")
    subscriptions = Path(directory, "subscriptions", "A.parquet")
    Path(directory, "messages", "A.parquet").write_bytes(subscriptions.read_bytes())
    with pytest.raises(InputError, match="holds the subscriptions table, not messages"):
        check_exports([directory])


def test_reconcile_command_exits_2_without_a_stack_trace(tmp_path, capsys) -> None:
    directory = write(tmp_path, "A", message_schema=with_version(9))
    status = cli.main(["reconcile", "--input", directory, "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.err.startswith("georep reconcile: error: schema version 9")
    assert "Traceback" not in captured.err and captured.out == ""


# --- schema helpers and export rows -------------------------------------------------
def test_positions_ranges_and_partitions_parse() -> None:
    assert parse_position(" 12:-1 ") == (12, -1)
    assert parse_ranges("[(3:5..3:7], (3:9..4:0]]") == [((3, 5), (3, 7)), ((3, 9), (4, 0))]
    assert schema.split_partition("persistent://t/n/x-partition-10") == ("persistent://t/n/x", 10)
    assert schema.split_partition("persistent://t/n/x-partition-01")[1] == -1
    for bad in ("3:5", "[(3:5,3:7]]", "[3:5..3:7]"):
        with pytest.raises(ValueError):
            parse_ranges(bad)


def test_origin_of_a_message() -> None:
    copy = {"georep.origin.cluster": "A", "georep.origin.position": "7:5"}
    assert export.origin_of(copy, "georep.repl.A", "B", 3, 1) == export.Origin("A", 7, 5)
    assert export.origin_of({}, "georep.repl.A", "B", 3, 1) == export.Origin("A", None, None)
    assert export.origin_of({}, "app", "B", 3, 1) == export.Origin("B", 3, 1)
    broken = {"georep.origin.cluster": "A", "georep.origin.position": "x"}
    assert export.origin_of(broken, "app", "B", 3, 1) == export.Origin("A", None, None)


def test_table_file_writes_bounded_row_groups_and_renames_when_complete(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "export_row_group_rows_max", 4)
    table_file = export.TableFile(tmp_path, schema.MESSAGES, "A")
    for entry in range(10):
        table_file.buffer.append(message_row(entry_id=entry, origin_entry_id=entry))
        assert table_file.buffer.rows < 4, "a full row group is written at once"
    assert not table_file.final.exists(), "no file under its final name before commit"
    assert table_file.commit() == 10
    written = pq.ParquetFile(table_file.final)
    assert [written.metadata.row_group(i).num_rows for i in range(3)] == [4, 4, 2]
    assert written.schema_arrow.metadata[schema.VERSION_KEY] == str(schema.SCHEMA_VERSION).encode()
    assert pq.read_table(table_file.final).column("entry_id").to_pylist() == list(range(10))
    assert not table_file.partial.exists()


# --- report ---------------------------------------------------------------------------
def test_report_page_is_self_contained_and_escaped() -> None:
    timeline = {
        "first_ms": 1_700_000_000_000,
        "last_ms": 1_700_000_060_000,
        "series": {
            "published": [5, 5, 0],
            "replication_gap": [0, 0, 3],
            "redelivery_risk": [0, 0, 0],
        },
    }
    page = report.render(
        title="drill <1>",
        totals={"replication_gap": 3},
        tables=[("Links", "per link", [{"topic": "<t>", "gap_messages": 3}], 1)],
        timelines={"persistent://t/n/x": timeline},
    )
    assert "drill &lt;1&gt;" in page and "&lt;t&gt;" in page
    assert page.count("<svg") == 1 and "polyline" in page
    # the timeline says its series in readable words (report.label), zero series left out
    assert "missing on a replica: 3" in page and "redelivery risk: 0" not in page
    assert "replication_gap: 3" not in page
    assert "<script" not in page and "src=" not in page


@pytest.mark.parametrize("flags", [["--link", "A"], ["--link", "A:A"], ["--conf", "novalue"]])
def test_bad_flags_exit_2_before_spark_starts(tmp_path, capsys, flags) -> None:
    directory = write(tmp_path, "A")
    status = cli.main(["reconcile", "--input", directory, "--out", str(tmp_path / "o"), *flags])
    assert status == 2
    assert capsys.readouterr().err.startswith("georep reconcile: error: --")
