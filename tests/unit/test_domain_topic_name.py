"""Topic names: the spellings the broker accepts, and a clear error for each it refuses."""

from __future__ import annotations

import pytest

from georep import limits
from georep.domain.topic_name import InvalidTopicName, TopicName, check_namespace

ACCEPTED = [
    # text, str(), namespace, local name, partition index
    (
        "persistent://public/default/orders",
        "persistent://public/default/orders",
        "public/default",
        "orders",
        -1,
    ),
    ("public/default/orders", "persistent://public/default/orders", "public/default", "orders", -1),
    ("orders", "persistent://public/default/orders", "public/default", "orders", -1),
    (
        "persistent://t/ns/orders-partition-3",
        "persistent://t/ns/orders-partition-3",
        "t/ns",
        "orders-partition-3",
        3,
    ),
    (
        "persistent://t/ns/orders-partition-0",
        "persistent://t/ns/orders-partition-0",
        "t/ns",
        "orders-partition-0",
        0,
    ),
    # not a partition: leading zero, sign, empty index, suffix alone
    (
        "persistent://t/ns/x-partition-01",
        "persistent://t/ns/x-partition-01",
        "t/ns",
        "x-partition-01",
        -1,
    ),
    (
        "persistent://t/ns/x-partition--1",
        "persistent://t/ns/x-partition--1",
        "t/ns",
        "x-partition--1",
        -1,
    ),
    (
        "persistent://t/ns/x-partition-",
        "persistent://t/ns/x-partition-",
        "t/ns",
        "x-partition-",
        -1,
    ),
    (
        "persistent://t/ns/-partition-2",
        "persistent://t/ns/-partition-2",
        "t/ns",
        "-partition-2",
        -1,
    ),
    (
        "persistent://a.b:c=d-e_f/ns/ünïcode topic",
        "persistent://a.b:c=d-e_f/ns/ünïcode topic",
        "a.b:c=d-e_f/ns",
        "ünïcode topic",
        -1,
    ),
]


@pytest.mark.parametrize(("text", "full", "namespace", "local", "partition"), ACCEPTED)
def test_accepted(text: str, full: str, namespace: str, local: str, partition: int) -> None:
    name = TopicName.parse(text)
    assert str(name) == full
    assert name.namespace == namespace
    assert name.local_name == local
    assert name.partition_index == partition
    assert TopicName.parse(str(name)) == name


REFUSED = [
    ("", "empty"),
    ("non-persistent://public/default/t", "not served"),
    ("http://public/default/t", "not served"),
    ("persistent://public/default", "of the form"),
    ("persistent://public/default/a/b", "of the form"),
    ("public/t", "of the form"),
    ("persistent://pub lic/default/t", "letters, digits"),
    ("persistent:///default/t", "tenant name is empty"),
    ("persistent://public//t", "namespace name is empty"),
    ("persistent://public/default/", "empty local name"),
    ("persistent://public/default/a\nb", "unprintable"),
    ("persistent://public/default/" + "x" * (limits.topic_local_name_chars_max + 1), "at most"),
    ("persistent://" + "t" * (limits.tenant_name_chars_max + 1) + "/ns/x", "at most"),
]


@pytest.mark.parametrize(("text", "reason"), REFUSED)
def test_refused(text: str, reason: str) -> None:
    with pytest.raises(InvalidTopicName, match=reason):
        TopicName.parse(text)


def test_partitions_and_base() -> None:
    base = TopicName.parse("persistent://t/ns/orders")
    partition = base.partition(7)
    assert str(partition) == "persistent://t/ns/orders-partition-7"
    assert partition.base == base
    assert base.base == base
    with pytest.raises(InvalidTopicName):
        partition.partition(1)


def test_managed_ledger_names_round_trip() -> None:
    name = TopicName.parse("persistent://t/ns/orders-partition-2")
    assert name.managed_ledger_name == "t/ns/persistent/orders-partition-2"
    assert TopicName.from_managed_ledger_name(name.managed_ledger_name) == name
    assert TopicName.from_managed_ledger_name("__georep/catalog") is None
    longest = TopicName.of(
        "t" * limits.tenant_name_chars_max + "/" + "n" * limits.namespace_name_chars_max,
        "x" * limits.topic_local_name_chars_max,
    )
    assert len(longest.managed_ledger_name) <= limits.managed_ledger_name_chars_max


def test_check_namespace() -> None:
    assert check_namespace("public/default") == "public/default"
    for bad in ("public", "public/", "/default", "a/b/c"):
        with pytest.raises(InvalidTopicName):
            check_namespace(bad)
