"""What the beside-Pulsar failover tests read of a cluster with the official client and
admin v2: every message of a topic by position, which of them a subscription has not
acknowledged, and what a consumer that moved there receives.

``client_options`` are ``pulsar.Client``'s keyword arguments for a cluster with TLS and
tokens on (``tls_trust_certs_file_path``, ``authentication``); none for plaintext.
"""

from __future__ import annotations

from typing import Any

import pulsar

from georep.pulsar.admin import PulsarAdmin
from georep.pulsar.cursor_text import acknowledged, parse_cursor


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
    """Every message of ``topic`` on a cluster, by position (unbatched messages)."""
    with_client = quiet_client(url, **client_options)
    try:
        reader = with_client.create_reader(topic, pulsar.MessageId.earliest)
        out: dict[Any, Any] = {}
        while True:
            try:
                message = reader.read_next(3000)
            except pulsar.Timeout:
                return out
            message_id = message.message_id()
            out[(message_id.ledger_id(), message_id.entry_id())] = message.data()
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


def drain(url: str, topic: str, **client_options: Any) -> list[bytes]:
    """What a Shared consumer of subscription ``s`` receives (and acknowledges)."""
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
