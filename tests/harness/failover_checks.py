"""What the beside-Pulsar failover tests read of a cluster with the official client and
admin v2: every message of a topic by position, which of them a subscription has not
acknowledged, and what a consumer that moved there receives.

``client_options`` are ``pulsar.Client``'s keyword arguments for a cluster with TLS and
tokens on (``tls_trust_certs_file_path``, ``authentication``); none for plaintext.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pulsar

from georep.pulsar_text.cursor import acknowledged, parse_cursor
from pulsar_tools.admin import PulsarAdmin
from tests.harness.waiting import wait_for


def stamps_source_position(version: str) -> bool:
    """Whether Pulsar ``version``'s replicator stamps each copy with its position on the
    source cluster (``__MSG_PROP_REPL_SOURCE_POSITION``): 4.0.7's does, 3.0.7's does not
    (no class of its jars names the property). Without it a copy made by Pulsar's own
    geo-replication cannot be mapped to its origin: the gateway's sync-only deployment
    syncs nothing there (and says so), and the drill's ``pulsar`` mode cannot run
    (docs/PULSAR.md)."""
    return not version.startswith("3.0.")


@dataclass
class Acknowledged:
    """Per deployment, the payloads a subscription on A acknowledged and those it left."""

    acked: dict[str, set[bytes]] = field(default_factory=dict)
    expected: dict[str, set[bytes]] = field(default_factory=dict)  # left unacknowledged


def acknowledge_all_but_every_seventh(
    client: pulsar.Client, topics: Iterable[tuple[str, str]], messages: int
) -> Acknowledged:
    """On each (deployment, topic): a Shared subscription ``s`` with its state replicated,
    ``messages`` produced (round robin over partitions), all received, and acknowledged
    out of order except every seventh. The consumers stay open until ``client`` closes."""
    topics = list(topics)
    out = Acknowledged()
    consumers = {
        key: client.subscribe(
            key[1],
            "s",
            consumer_type=pulsar.ConsumerType.Shared,
            replicate_subscription_state_enabled=True,  # what the gateways sync
        )
        for key in topics
    }
    failed: list[pulsar.Result] = []

    def note_failure(result: pulsar.Result, _message_id: Any) -> None:
        if result != pulsar.Result.Ok:
            failed.append(result)

    for name, topic in topics:
        out.acked.setdefault(name, set())
        out.expected.setdefault(name, set())
        producer = client.create_producer(
            topic,
            batching_enabled=False,
            message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
        )
        for index in range(messages):  # in order, without a round trip per message
            producer.send_async(f"{name}-{topic}-{index}".encode(), note_failure)
        producer.flush()
        producer.close()
    assert not failed, f"{len(failed)} messages not sent ({failed[0]})"
    for (name, _topic), consumer in consumers.items():
        received = [consumer.receive(10_000) for _ in range(messages)]
        random.Random(5).shuffle(received)  # out of order on purpose
        for message in received:
            if int(message.data().split(b"-")[-1]) % 7 == 3:
                out.expected[name].add(message.data())
            else:
                consumer.acknowledge(message)
                out.acked[name].add(message.data())
    return out


def wait_until_synced(
    b: Any,
    topics: dict[tuple[str, str], int],
    expected: dict[str, set[bytes]],
    messages: int,
    *,
    admin: PulsarAdmin | None = None,
    explain: Callable[[], str] = lambda: "",
    **client_options: Any,
) -> None:
    """Wait until every partition of each (deployment, topic) on ``b`` holds its copies
    and subscription ``s`` there left unacknowledged exactly what A left (``topics``:
    partitions per topic, 0 for a plain one). ``explain`` adds to the failure."""
    for (name, topic), partitions in topics.items():
        for leaf in leaves(topic, partitions):
            try:
                _wait_until_leaf_synced(
                    b, leaf, messages // max(1, partitions), expected[name], admin, client_options
                )
            except AssertionError as failed:
                raise AssertionError(f"{name}: {failed}; {explain()}") from None


def _wait_until_leaf_synced(
    b: Any,
    leaf: str,
    count: int,
    expected: set[bytes],
    admin: PulsarAdmin | None,
    client_options: dict[str, Any],
) -> None:
    def copies_made() -> dict[tuple[int, int], bytes] | None:
        found = positions_and_payloads(b.service_url, leaf, **client_options)
        return found if len(found) >= count else None

    copies: dict[tuple[int, int], bytes] = wait_for(copies_made, timeout_s=120)
    synced = expected & set(copies.values())
    try:
        wait_for(lambda: unacknowledged_on(b, leaf, copies, admin) == synced, timeout_s=120)
    except TimeoutError:
        left = unacknowledged_on(b, leaf, copies, admin)
        raise AssertionError(
            f"{leaf} on B: {len(left)} unacknowledged, {len(synced)} expected;"
            f" {len(left - synced)} acknowledged on A only"
        ) from None


def quiet_client(url: str, **client_options: Any) -> pulsar.Client:
    return pulsar.Client(
        url,
        operation_timeout_seconds=30,
        logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, "/dev/null"),
        **client_options,
    )


def positions_and_payloads(
    url: str, topic: str, **client_options: Any
) -> dict[tuple[int, int], bytes]:
    """Every message of ``topic`` on a cluster, by position (unbatched messages), up to
    the end the broker knows when the read starts. The end may be a marker, which a
    reader never sees: a second without a message ends the read too."""
    with_client = quiet_client(url, **client_options)
    try:
        reader = with_client.create_reader(topic, pulsar.MessageId.earliest)
        out: dict[Any, Any] = {}
        while reader.has_message_available():
            try:
                message = reader.read_next(1000)
            except pulsar.Timeout:
                break
            message_id = message.message_id()
            out[(message_id.ledger_id(), message_id.entry_id())] = message.data()
        return out
    finally:
        with_client.close()


def unacknowledged_on(
    cluster: Any,
    topic: str,
    copies: dict[tuple[int, int], bytes],
    admin: PulsarAdmin | None = None,
) -> set[bytes]:
    """The payloads of ``copies`` that subscription ``s`` on ``cluster`` has not acked
    (``admin``: the cluster's admin client, when it needs a token or a CA)."""
    admin = admin or PulsarAdmin(cluster.admin_url)
    cursor = admin.internal_stats(topic)["cursors"].get("s")
    if cursor is None:
        return set(copies.values())
    mark_delete, ranges = parse_cursor(cursor)
    return {
        payload
        for where, payload in copies.items()
        if not acknowledged(where, mark_delete, ranges)  # type: ignore[arg-type]
    }


def drain(url: str, topic: str | list[str], **client_options: Any) -> list[bytes]:
    """What a Shared consumer of subscription ``s`` receives (and acknowledges), of one
    topic or of several at once (one quiet wait for them all)."""
    client = quiet_client(url, **client_options)
    try:
        consumer = client.subscribe(
            topic,
            "s",
            consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        got: list[Any] = []
        while True:
            try:
                message = consumer.receive(3000)
            except pulsar.Timeout:
                return got
            got.append(message.data())
            consumer.acknowledge(message)
    finally:
        client.close()


def leaves(topic: str, partitions: int) -> list[str]:
    """The topics holding messages: the partitions of a partitioned topic, else itself."""
    if not partitions:
        return [topic]
    return [f"{topic}-partition-{index}" for index in range(partitions)]
