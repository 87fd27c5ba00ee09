"""The gateway's rows in the metadata store (revision 0004): remote clusters synced from
the configuration, and replication policies changed by compare-and-set."""

from __future__ import annotations

import pytest

from georep.storage.errors import BadVersion, InvalidArgument


async def test_remote_clusters_follow_the_configuration(gateway_meta) -> None:
    first = await gateway_meta.replication_policies.sync_remote_clusters(
        {"B": ("pulsar://b:6650", "http://b:8080"), "C": ("pulsar://c:6650", "http://c:8080")}
    )
    assert [(c.name, c.version) for c in first] == [("B", 1), ("C", 1)]
    second = await gateway_meta.replication_policies.sync_remote_clusters(
        {"B": ("pulsar://b:6651", "http://b:8080"), "D": ("pulsar://d:6650", "http://d:8080")}
    )
    assert [(c.name, c.service_url, c.version) for c in second] == [
        ("B", "pulsar://b:6651", 2),
        ("D", "pulsar://d:6650", 1),
    ]
    assert await gateway_meta.replication_policies.list_remote_clusters() == second


async def test_policy_versions_and_cas(gateway_meta) -> None:
    meta = gateway_meta
    created = await meta.replication_policies.put_replication_policy(
        "namespace", "t/ns", ["C", "B", "B"]
    )
    assert created.clusters == ("B", "C") and created.version == 1
    with pytest.raises(BadVersion):
        await meta.replication_policies.put_replication_policy(
            "namespace", "t/ns", ["B"], expected_version=0
        )
    with pytest.raises(BadVersion):
        await meta.replication_policies.put_replication_policy(
            "namespace", "t/ns", ["B"], expected_version=7
        )
    updated = await meta.replication_policies.put_replication_policy(
        "namespace", "t/ns", [], expected_version=1
    )
    assert updated.clusters == () and updated.version == 2
    last_writer = await meta.replication_policies.put_replication_policy("namespace", "t/ns", ["B"])
    assert last_writer.version == 3
    assert (
        await meta.replication_policies.get_replication_policy("namespace", "t/ns") == last_writer
    )
    with pytest.raises(BadVersion):
        await meta.replication_policies.delete_replication_policy(
            "namespace", "t/ns", expected_version=2
        )
    assert await meta.replication_policies.delete_replication_policy(
        "namespace", "t/ns", expected_version=3
    )
    assert not await meta.replication_policies.delete_replication_policy("namespace", "t/ns")
    assert await meta.replication_policies.get_replication_policy("namespace", "t/ns") is None


async def test_policies_list_by_scope(gateway_meta) -> None:
    meta = gateway_meta
    await meta.replication_policies.put_replication_policy("topic", "persistent://t/ns/x", ["B"])
    await meta.replication_policies.put_replication_policy("namespace", "t/ns", ["B", "C"])
    listed = await meta.replication_policies.list_replication_policies()
    assert [(p.scope, p.name) for p in listed] == [
        ("namespace", "t/ns"),
        ("topic", "persistent://t/ns/x"),
    ]
    topics = await meta.replication_policies.list_replication_policies("topic")
    assert [p.name for p in topics] == ["persistent://t/ns/x"]


@pytest.mark.parametrize(
    ("scope", "name", "clusters"),
    [
        ("tenant", "t", ["B"]),
        ("namespace", "", ["B"]),
        ("namespace", "t/ns", "B"),
        ("namespace", "t/ns", [""]),
        ("namespace", "t/ns", [f"c{i}" for i in range(65)]),
    ],
)
async def test_bad_policies_are_refused(gateway_meta, scope, name, clusters) -> None:
    with pytest.raises(InvalidArgument):
        await gateway_meta.replication_policies.put_replication_policy(scope, name, clusters)
