"""The gateway's subscription-sync policies in the metadata store (revision 0008): a
choice and pattern checked on the way in, versions compared and set as replication
policies' are."""

from __future__ import annotations

import pytest

from georep import limits
from georep.storage.errors import BadVersion, InvalidArgument


async def test_policy_versions_and_cas(gateway_meta) -> None:
    policies = gateway_meta.subscription_sync_policies
    created = await policies.put_policy("namespace", "t/ns", "flagged", "orders-.*")
    assert (created.subscriptions, created.pattern, created.version) == (
        "flagged",
        "orders-.*",
        1,
    )
    with pytest.raises(BadVersion):
        await policies.put_policy("namespace", "t/ns", "all", expected_version=0)
    with pytest.raises(BadVersion):
        await policies.put_policy("namespace", "t/ns", "all", expected_version=7)
    updated = await policies.put_policy("namespace", "t/ns", "all", expected_version=1)
    assert (updated.subscriptions, updated.pattern, updated.version) == ("all", None, 2)
    assert await policies.get_policy("namespace", "t/ns") == updated
    with pytest.raises(BadVersion):
        await policies.delete_policy("namespace", "t/ns", expected_version=1)
    assert await policies.delete_policy("namespace", "t/ns", expected_version=2)
    assert not await policies.delete_policy("namespace", "t/ns")
    assert await policies.get_policy("namespace", "t/ns") is None


async def test_policies_list_by_scope_apart_from_replication_policies(gateway_meta) -> None:
    policies = gateway_meta.subscription_sync_policies
    await policies.put_policy("topic", "persistent://t/ns/x", "flagged")
    await policies.put_policy("namespace", "t/ns", "all")
    await gateway_meta.replication_policies.put_replication_policy("namespace", "t/ns", ["B"])
    listed = await policies.list_policies()
    assert [(p.scope, p.name, p.subscriptions, p.pattern) for p in listed] == [
        ("namespace", "t/ns", "all", None),
        ("topic", "persistent://t/ns/x", "flagged", None),
    ]
    assert [p.name for p in await policies.list_policies("topic")] == ["persistent://t/ns/x"]


@pytest.mark.parametrize(
    ("scope", "subscriptions", "pattern", "words"),
    [
        ("tenant", "all", None, "scope"),
        ("namespace", "some", None, "subscriptions must be one of"),
        ("namespace", "all", "orders-.*", 'beside subscriptions "all"'),
        ("namespace", "flagged", "orders-(", "is not a regular expression"),
        ("namespace", "flagged", "", "1..256 characters"),
        ("namespace", "flagged", "x" * (limits.sync_subscription_pattern_chars_max + 1), "257"),
        ("namespace", "flagged", "a\nb", "unprintable"),
        ("namespace", "flagged", 7, "must be a string"),
    ],
)
async def test_bad_policies_are_refused(gateway_meta, scope, subscriptions, pattern, words):
    with pytest.raises(InvalidArgument) as caught:
        await gateway_meta.subscription_sync_policies.put_policy(
            scope, "t/ns", subscriptions, pattern
        )
    assert words in str(caught.value)
