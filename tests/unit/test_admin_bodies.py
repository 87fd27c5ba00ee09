"""Table-driven checks of the admin REST's parsers (bodies, names) on the way in and the
shape checker on the way out."""

from __future__ import annotations

from typing import NotRequired, TypedDict

import pytest

from georep import limits
from georep.broker.admin import bodies, names, schemas, shapes
from georep.broker.admin.cluster_admin import (
    InvalidArgument,
    PersistentTopicInternalStats,
    TopicStats,
    format_ranges,
)
from georep.domain.position import Position
from georep.rest import json_io
from georep.rest.errors import RestError

_I64_MAX = 2**63 - 1


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"ledgerId": 3, "entryId": 0}, (3, 0)),
        ({"ledgerId": -1, "entryId": -1}, (-1, -1)),
        ({"ledgerId": _I64_MAX, "entryId": _I64_MAX}, (_I64_MAX, _I64_MAX)),
        ({"ledgerId": 3, "entryId": 4, "partitionIndex": 2, "batchIndex": 5}, (3, 4)),
        ({"ledgerId": 3, "entryId": 4, "excluded": False, "properties": {"a": "b"}}, (3, 4)),
    ],
)
def test_message_position_accepts(document: object, expected: tuple[int, int]) -> None:
    assert bodies.message_position(document) == expected


@pytest.mark.parametrize(
    "document",
    [
        None,
        [],
        "3:4",
        {"ledgerId": 3},
        {"ledgerId": 3, "entryId": True},
        {"ledgerId": 3.0, "entryId": 1},
        {"ledgerId": -2, "entryId": 1},
        {"ledgerId": -1, "entryId": 1},
        {"ledgerId": 3, "entryId": -1},
        {"ledgerId": 2**63, "entryId": 1},
        {"ledgerId": 3, "entryId": 1, "excluded": "no"},
        {"ledgerId": 3, "entryId": 1, "properties": []},
        {"ledgerId": 3, "entryId": 1, "partitionIndex": limits.partitions_count_max},
        {"ledgerId": 3, "entryId": 1, "messageId": 1},
    ],
)
def test_message_position_refuses(document: object) -> None:
    with pytest.raises(InvalidArgument):
        bodies.message_position(document)


def test_acknowledged_positions_are_sorted_and_distinct() -> None:
    document = {"positions": [{"ledgerId": 2, "entryId": 1}, {"ledgerId": 1, "entryId": 9},
                              {"ledgerId": 2, "entryId": 1}]}  # fmt: skip
    assert bodies.acknowledged_positions(document) == [(1, 9), (2, 1)]


def test_tenant_info_keeps_order_and_drops_duplicates() -> None:
    info = bodies.tenant_info({"adminRoles": ["b", "a", "b"], "allowedClusters": ["A"]})
    assert info == bodies.TenantInfo(("b", "a"), ("A",))
    assert bodies.tenant_info({}) == bodies.TenantInfo((), ())


@pytest.mark.parametrize(
    ("raw", "content_type"),
    [
        (b"{", "application/json"),
        (b"\xc3\x28", "application/json"),
        (b"[Infinity]", "application/json"),
        (b"[" * 100_000 + b"]" * 100_000, "application/json"),
        (b"{}", "application/x-www-form-urlencoded"),
        (b"{}", None),
        (b'{"a": 1, "a": 2}', "application/json"),
        (b'[{"x": {"b": 1, "c": 2, "b": 3}}]', "application/json"),
    ],
)
def test_decode_json_refuses(raw: bytes, content_type: str | None) -> None:
    with pytest.raises(RestError) as refused:
        json_io.decode_json(raw, content_type)
    assert refused.value.status in (400, 415)
    if b'"b": 3' in raw:
        assert "['b']" in str(refused.value)


@pytest.mark.parametrize(
    ("text", "minimum", "expected"),
    [("0", 0, 0), ("42", 1, 42), ("9223372036854775807", 0, _I64_MAX)],
)
def test_path_integer_accepts(text: str, minimum: int, expected: int) -> None:
    assert bodies.path_integer("n", text, minimum, _I64_MAX) == expected


@pytest.mark.parametrize("text", ["", "-1", "+1", "1.0", "0x10", " 1", "1e3", "\u0661", "9" * 20])
def test_path_integer_refuses(text: str) -> None:
    with pytest.raises(InvalidArgument):
        bodies.path_integer("n", text, 0, _I64_MAX)


@pytest.mark.parametrize(
    ("check", "value"),
    [
        (names.tenant, ""),
        (names.tenant, "a/b"),
        (names.tenant, "é"),
        (names.tenant, "t" * (limits.tenant_name_chars_max + 1)),
        (lambda v: names.namespace("public", v), "n s"),
        (lambda v: names.topic("public", "default", v), ""),
        (lambda v: names.topic("public", "default", v), "a\x00b"),
        (lambda v: names.new_partitioned_topic("public", "default", v), "x-partition-0"),
        (names.subscription, ""),
        (names.subscription, "a/b"),
        (names.subscription, "s" * (limits.subscription_name_chars_max + 1)),
        (names.cluster, "c" * (limits.cluster_name_chars_max + 1)),
        (names.cluster, 7),
        (names.role, "\n"),
    ],
)
def test_names_refuse(check, value: object) -> None:
    with pytest.raises(InvalidArgument):
        check(value)


def test_names_accept_pulsar_charset() -> None:
    assert names.tenant("a-b_c=d:e.f") == "a-b_c=d:e.f"
    topic = names.topic("public", "default", "orders-partition-2")
    assert (topic.partition_index, str(topic.base)) == (2, "persistent://public/default/orders")
    assert names.subscription("sub with spaces") == "sub with spaces"


def test_format_helpers() -> None:
    assert str(Position(3, -1)) == "3:-1"
    assert format_ranges([]) == "[]"
    assert (
        format_ranges([(Position(3, 5), Position(3, 7)), (Position(3, 9), Position(3, 10))])
        == "[(3:5..3:7], (3:9..3:10]]"
    )


class _Inner(TypedDict):
    count: int
    note: NotRequired[str]


class _Outer(TypedDict):
    rate: float
    items: list[_Inner]
    by_name: dict[str, _Inner]


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"rate": 1, "items": [], "by_name": {}}, None),
        ({"rate": 1.5, "items": [{"count": 1, "note": "x"}], "by_name": {"a": {"count": 2}}}, None),
        ({"rate": 1.0, "items": []}, "missing by_name"),
        ({"rate": True, "items": [], "by_name": {}}, "_Outer.rate: expected a number"),
        ({"rate": 1, "items": [{"count": "1"}], "by_name": {}}, "_Outer.items[0].count"),
        ({"rate": 1, "items": [], "by_name": {"a": {}}}, "_Outer.by_name['a']: missing count"),
        ({"rate": 1, "items": [], "by_name": {"a": {"count": 1, "note": 3}}}, "note"),
        ([], "expected an object"),
    ],
)
def test_shape_check(value: object, words: str | None) -> None:
    if words is None:
        shapes.check(_Outer, value)
    else:
        with pytest.raises(shapes.ShapeError, match=words.replace("[", r"\[").replace("]", r"\]")):
            shapes.check(_Outer, value)


def test_response_schemas_follow_the_typeddicts() -> None:
    found = schemas.typeddict_schemas(TopicStats, PersistentTopicInternalStats)
    assert found["TopicStats"]["required"] == sorted(TopicStats.__annotations__)
    assert "properties" not in found["CursorStats"]["required"]
    assert found["SubscriptionStats"]["properties"]["consumers"]["items"] == schemas.ref(
        "ConsumerStats"
    )
