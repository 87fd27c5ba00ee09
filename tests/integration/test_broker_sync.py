"""The broker's side of replicated-subscription sync, on a real ``georep cluster``
process: markers reach the gateway's subscriptions (``georep.*``) of every type and no
other, only the gateway's producers may publish them, the replicated flag (set by
pulsar-client, a subscription property or a sync) shows in sync-state and stats and
survives a restart, ``GET .../sync-state`` reports ranges and partial batches, and
``POST .../subscription/{s}/sync`` creates, moves forward only, acknowledges ranges and
batch members, steps over markers, refuses bad bodies without changing anything, and
never disconnects a live consumer, which is not given what the sync acknowledged.
The admin calls go through the gateway's own client (``ClusterAdminClient``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator, Sequence

import pulsar
import pytest

from georep.client.admin import ClusterAdminClient, SubscriptionState
from georep.client.consumer import SubType
from georep.client.errors import AdminRequestFailed, ServerError
from georep.client.link import PulsarLink
from georep.domain.position import Position
from georep.domain.topic_name import TopicName
from georep.runtime.awaiting import within
from georep.snapshots import markers
from georep.snapshots import markers_pb2 as markers_pb
from georep.wire import commands, frames
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import Type
from tests.harness.broker_cluster import (
    ClusterProcess,
    RawConnection,
    admin_call,
    connect_frame,
    open_client,
    receive_all,
    receive_none,
    unique_topic,
)
from tests.harness.waiting import wait_for

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

EARLIEST = pulsar.InitialPosition.Earliest
#: A marker entry in a layout of entries to publish.
MARKER = None
GEOREP_V1 = "/admin/georep/v1/persistent/"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[ClusterProcess]:
    process = ClusterProcess(tmp_path_factory.mktemp("sync") / "cluster", name="S")
    process.start()
    yield process
    process.kill()


@pytest.fixture
async def admin(cluster: ClusterProcess):
    client = ClusterAdminClient(admin_url(cluster), cluster_name=cluster.name)
    yield client
    await client.close()


def admin_url(cluster: ClusterProcess) -> str:
    return f"http://127.0.0.1:{cluster.admin_port}"


def sync_path(topic: str, subscription: str) -> str:
    return f"{GEOREP_V1}{topic.removeprefix('persistent://')}/subscription/{subscription}/sync"


def state_path(topic: str) -> str:
    return f"{GEOREP_V1}{topic.removeprefix('persistent://')}/sync-state"


def stats_path(topic: str, kind: str = "stats") -> str:
    return f"/admin/v2/persistent/{topic.removeprefix('persistent://')}/{kind}"


def doc(position: Sequence[int]) -> dict[str, int]:
    return {"ledgerId": position[0], "entryId": position[1]}


def span(first: Sequence[int], last: Sequence[int]) -> dict:
    return {"first": doc(first), "last": doc(last)}


def before(position: tuple[int, int]) -> tuple[int, int]:
    return (position[0], position[1] - 1)


async def publish(
    link: PulsarLink, topic: str, layout: list[bytes | None], name: str = "georep.sync"
) -> list[Position]:
    """Publish ``layout`` (payloads; MARKER for a snapshot-request marker) with the
    gateway's link as producer ``name``; the positions, in order."""
    producer = await link.create_producer(topic, name)
    first = producer.last_sequence_id + 1
    futures = []
    for n, payload in enumerate(layout):
        metadata = pb.MessageMetadata(
            producer_name=name, sequence_id=first + n, publish_time=int(time.time() * 1000)
        )
        if payload is MARKER:
            metadata.marker_type = markers.MarkerKind.SNAPSHOT_REQUEST
            payload = markers.encode(
                markers.MarkerKind.SNAPSHOT_REQUEST,
                markers_pb.SnapshotRequest(snapshot_id=f"s{n}", source_cluster="S"),
            )
        futures.append(await producer.send(metadata, payload))
    receipts = await asyncio.gather(*futures)
    await producer.close()
    return [receipt.position for receipt in receipts]


def ack_individually(consumer, positions: Sequence[tuple[int, int]]) -> None:
    """An individual ACK on a link consumer (its API only acknowledges cumulatively)."""
    consumer.connection.send_command(
        commands.build(
            Type.ACK,
            consumer_id=consumer.consumer_id,
            ack_type=pb.Ack.INDIVIDUAL,
            message_id=[pb.MessageIdData(ledger_id=p[0], entry_id=p[1]) for p in positions],
        )
    )


async def eventually(check, timeout_s: float = 10.0):
    """Await ``check()`` until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"not met within {timeout_s} s; last: {value!r}")
        await asyncio.sleep(0.1)


async def subscription_state(
    admin: ClusterAdminClient, topic: str, name: str
) -> SubscriptionState | None:
    return (await admin.sync_state(TopicName.parse(topic)))["subscriptions"].get(name)


async def existing_state(admin: ClusterAdminClient, topic: str, name: str) -> SubscriptionState:
    """``subscription_state`` of a subscription the test expects to exist."""
    state = await subscription_state(admin, topic, name)
    assert state is not None, f"no subscription {name} on {topic}"
    return state


# --- markers ---------------------------------------------------------------------------
async def test_markers_reach_the_gateways_subscriptions_of_every_type_and_no_other(cluster):
    topic = unique_topic("markers")
    layout = [b"m0", MARKER, b"m1", MARKER, b"m2"]
    types = {
        "georep.sync": SubType.EXCLUSIVE,
        "georep.repl.X": SubType.FAILOVER,
        "georep.shared": SubType.SHARED,
        "georep.key-shared": SubType.KEY_SHARED,
    }
    with open_client(cluster.url) as client:
        application = client.subscribe(topic, "app", initial_position=EARLIEST)
        link = PulsarLink(cluster.url)
        try:
            readers = {
                name: await link.subscribe(topic, name, sub_type=t) for name, t in types.items()
            }
            readers["georep.reader"] = await link.subscribe(topic, "georep.reader", durable=False)
            positions = await publish(link, topic, layout)
            for name, reader in readers.items():
                got = [await within(reader.receive(), 10) for _ in layout]
                assert [entry.position for entry in got] == positions, name
                found = [entry for entry in got if entry.metadata.HasField("marker_type")]
                assert [entry.position for entry in found] == [positions[1], positions[3]], name
                kind, request = markers.decode(found[0].metadata.marker_type, found[0].payload)
                assert isinstance(request, markers_pb.SnapshotRequest)
                assert (kind, request.snapshot_id) == (markers.MarkerKind.SNAPSHOT_REQUEST, "s1")
                assert found[0].metadata.producer_name == "georep.sync"  # stored as sent
                if types.get(name) in (SubType.SHARED, SubType.KEY_SHARED):
                    ack_individually(reader, positions)
                else:
                    reader.ack_cumulative(positions[-1])
            for name in types:

                async def acknowledged(name=name) -> bool:
                    _, internal = admin_call(
                        admin_url(cluster), "GET", stats_path(topic, "internalStats")
                    )
                    cursor = internal["cursors"][name]
                    return cursor["markDeletePosition"] == str(positions[-1])

                await eventually(acknowledged)
        finally:
            await link.close()
        assert [m.data() for m in receive_all(application, 3)] == [b"m0", b"m1", b"m2"]
        assert receive_none(application) == []


async def test_only_the_gateways_producers_may_publish_markers(cluster, admin):
    topic = unique_topic("refused")
    link = PulsarLink(cluster.url)
    try:
        with pytest.raises(ServerError) as refused:
            await publish(link, topic, [MARKER], name="application")
        assert refused.value.code == pb.NOT_ALLOWED_ERROR
        assert "markers" in str(refused.value) and "georep." in str(refused.value)
        state = await admin.sync_state(TopicName.parse(topic))
        assert state["last"] is None  # nothing stored
        (position,) = await publish(link, topic, [MARKER], name="georep.sync")
        assert (await admin.sync_state(TopicName.parse(topic)))["last"] == position
    finally:
        await link.close()


# --- sync-state -------------------------------------------------------------------------
async def test_sync_state_reports_ranges_a_partial_batch_and_consumers(cluster, admin):
    topic = unique_topic("state")
    with open_client(cluster.url) as client:
        consumer = client.subscribe(
            topic,
            "app",
            consumer_type=pulsar.ConsumerType.Shared,
            initial_position=EARLIEST,
            batch_index_ack_enabled=True,
        )
        batched = client.create_producer(
            topic,
            batching_enabled=True,
            batching_max_messages=4,
            batching_max_publish_delay_ms=60_000,
        )
        for n in range(4):
            batched.send_async(f"b{n}".encode(), None)
        batched.flush()
        single = client.create_producer(topic, batching_enabled=False)
        ids = [single.send(f"s{n}".encode()) for n in range(6)]
        got = receive_all(consumer, 10, ack=False)
        members = [m for m in got if m.data().startswith(b"b")]
        batch_position = (members[0].message_id().ledger_id(), members[0].message_id().entry_id())
        assert {m.message_id().batch_index() for m in members} == {0, 1, 2, 3}
        for message in members[1:3]:
            consumer.acknowledge(message)
        for message_id in (ids[1], ids[2], ids[4]):
            consumer.acknowledge(message_id)
        singles = [(i.ledger_id(), i.entry_id()) for i in ids]
        link = PulsarLink(cluster.url)
        try:
            await link.subscribe(topic, "georep.sync")  # the gateway's: not reported

            async def settled():
                state = await subscription_state(admin, topic, "app")
                return (
                    state
                    if state is not None and len(state.ranges) == 2 and state.batches
                    else None
                )

            state = await eventually(settled)
        finally:
            await link.close()
        assert state.mark_delete == before(batch_position)
        assert state.ranges == ((singles[1], singles[2]), (singles[4], singles[4]))
        assert state.batches == {batch_position: (4, frozenset({1, 2}))}
        assert (state.consumers, state.sub_type, state.replicated) == (1, "Shared", False)
        full = await admin.sync_state(TopicName.parse(topic))
        assert set(full["subscriptions"]) == {"app"}
        assert full["last"] == singles[-1]
        consumer.close()
        state = await existing_state(admin, topic, "app")
        assert state.consumers == 0


async def test_sync_state_of_a_missing_topic_is_404(cluster, admin):
    topic = unique_topic("missing")
    with pytest.raises(AdminRequestFailed) as missing:
        await admin.sync_state(TopicName.parse(topic))
    assert missing.value.status == 404
    status, body = admin_call(admin_url(cluster), "GET", state_path(topic))
    assert status == 404 and "does not exist" in body["reason"]
    status, body = admin_call(admin_url(cluster), "POST", sync_path(topic, "s"), {})
    assert status == 404 and "reason" in body


# --- sync -------------------------------------------------------------------------------
async def test_sync_creates_moves_forward_only_and_steps_over_markers(cluster, admin):
    topic = unique_topic("sync")
    name = TopicName.parse(topic)
    layout = [b"m0", b"m1", MARKER, b"m3", b"m4", MARKER, MARKER, b"m7", b"m8", b"m9"]
    link = PulsarLink(cluster.url)
    try:
        p = await publish(link, topic, layout)
    finally:
        await link.close()

    answer = await admin.sync_subscription(name, "standby", mark_delete=p[0])
    assert answer == {"markDelete": doc(p[0]), "rangesCount": 0, "created": True}
    answer = await admin.sync_subscription(name, "standby", ranges=[(p[3], p[4])])
    assert answer == {"markDelete": doc(p[0]), "rangesCount": 1, "created": False}
    # m1 acknowledged: the MDP reaches m1, steps over the marker, the range m3..m4 and the
    # two markers after it, and stops before m7, the first message not acknowledged.
    answer = await admin.sync_subscription(name, "standby", ranges=[(p[1], p[1])])
    assert answer == {"markDelete": doc(p[6]), "rangesCount": 0, "created": False}
    # Never backwards.
    answer = await admin.sync_subscription(name, "standby", mark_delete=p[0])
    assert answer["markDelete"] == doc(p[6])
    # A range past the last entry acknowledges what exists of it, and nothing to come.
    beyond = (p[9][0], p[9][1] + 1_000_000)
    answer = await admin.sync_subscription(name, "standby", ranges=[(p[8], beyond)])
    assert answer == {"markDelete": doc(p[6]), "rangesCount": 1, "created": False}
    state = await existing_state(admin, topic, "standby")
    assert state.ranges == ((p[8], p[9]),) and state.consumers == 0 and state.sub_type is None
    answer = await admin.sync_subscription(name, "standby", mark_delete=beyond)
    assert answer == {"markDelete": doc(p[9]), "rangesCount": 0, "created": False}
    link = PulsarLink(cluster.url)
    try:
        later = await publish(link, topic, [b"m10"])
    finally:
        await link.close()
    with open_client(cluster.url) as client:
        consumer = client.subscribe(topic, "standby")
        assert [m.data() for m in receive_all(consumer, 1)] == [b"m10"]
        assert receive_none(consumer) == []
        consumer.close()
    assert (await existing_state(admin, topic, "standby")).mark_delete == later[0]

    # Created with ranges only: from before the earliest entry.
    answer = await admin.sync_subscription(name, "fresh", ranges=[(p[2], p[3])])
    assert answer == {"markDelete": doc(before(p[0])), "rangesCount": 1, "created": True}


async def test_sync_acknowledges_batch_members_and_refuses_an_index_past_the_batch(cluster, admin):
    topic = unique_topic("batches")
    name = TopicName.parse(topic)
    with open_client(cluster.url) as client:
        client.subscribe(topic, "app", initial_position=EARLIEST).close()
        producer = client.create_producer(
            topic,
            batching_enabled=True,
            batching_max_messages=4,
            batching_max_publish_delay_ms=60_000,
        )
        sent = []
        for n in range(4):
            producer.send_async(
                f"b{n}".encode(), lambda _result, message_id: sent.append(message_id)
            )
        producer.flush()
        wait_for(lambda: len(sent) == 4)
        single = client.create_producer(topic, batching_enabled=False).send(b"after")
    batch = (sent[0].ledger_id(), sent[0].entry_id())

    answer = await admin.sync_subscription(name, "app", batches={batch: [0, 2]})
    assert answer["markDelete"] == doc(before(batch))
    state = await existing_state(admin, topic, "app")
    assert state.batches == {batch: (4, frozenset({0, 2}))}

    after = (single.ledger_id(), single.entry_id())
    body = {"ranges": [span(after, after)], "batches": [{**doc(batch), "ackedIndexes": [1, 4]}]}
    status, body = admin_call(admin_url(cluster), "POST", sync_path(topic, "app"), body)
    assert status == 400 and "holds 4 messages" in body["reason"], body
    assert await subscription_state(admin, topic, "app") == state  # nothing changed

    with open_client(cluster.url) as client:
        consumer = client.subscribe(topic, "app", batch_index_ack_enabled=True)
        got = [m.data() for m in receive_all(consumer, 3, ack=False)]
        assert got == [b"b1", b"b3", b"after"]  # the synced members are not delivered
        consumer.close()
    answer = await admin.sync_subscription(name, "app", batches={batch: [1, 3]})
    assert answer["markDelete"] == doc(batch)  # every member acknowledged: the whole entry
    assert (await existing_state(admin, topic, "app")).batches == {}


async def test_bad_bodies_are_refused_and_change_nothing(cluster, admin):
    topic = unique_topic("bad")
    link = PulsarLink(cluster.url)
    try:
        p = await publish(link, topic, [b"m0", b"m1", b"m2"])
    finally:
        await link.close()
    await admin.sync_subscription(TopicName.parse(topic), "s", ranges=[(p[1], p[1])])
    before_state = await admin.sync_state(TopicName.parse(topic))
    bad = [
        ([], "must be a JSON object"),
        ({"markDelete": {"ledgerId": p[0][0]}}, "missing entryId"),
        ({"markDelete": {"ledgerId": -1, "entryId": 0}}, "ledgerId must be"),
        ({"ranges": [span(p[2], p[0])]}, "is before first"),
        ({"ranges": [{"first": doc(p[0]), "last": {"ledgerId": 1, "entryId": -3}}]}, "entryId"),
        ({"ranges": {"first": doc(p[0])}}, "must be a list"),
        ({"ranges": [span(p[0], p[0])] * 10_001}, "at most 10000"),
        ({"batches": [{**doc(p[0]), "ackedIndexes": [0]}] * 1_001}, "at most 1000"),
        ({"batches": [{**doc(p[0]), "ackedIndexes": [-1]}]}, "ackedIndexes[0]"),
        ({"batches": [{**doc(p[0]), "ackedIndexes": [1]}]}, "holds 1 messages"),
        ({"replicated": "yes"}, "true or false"),
        ({"markDelete": doc(p[2]), "mark_delete": doc(p[2])}, "unknown fields"),
    ]
    for body, reason in bad:
        status, answer = admin_call(admin_url(cluster), "POST", sync_path(topic, "s"), body)
        assert status == 400 and reason in answer["reason"], (body, answer)
        status, answer = admin_call(admin_url(cluster), "POST", sync_path(topic, "new"), body)
        assert status == 400, (body, answer)
    for reserved in ("georep.sync", "georep.repl.X", "pulsar.dedup"):
        status, answer = admin_call(
            admin_url(cluster), "POST", sync_path(topic, reserved), {"markDelete": doc(p[2])}
        )
        assert status == 400 and "not synced" in answer["reason"], answer
    assert await admin.sync_state(TopicName.parse(topic)) == before_state


async def test_a_live_consumer_stays_and_is_not_given_what_the_sync_acknowledged(cluster, admin):
    topic = unique_topic("live")
    name = TopicName.parse(topic)
    with open_client(cluster.url) as client:
        shared = client.subscribe(
            topic, "shared", consumer_type=pulsar.ConsumerType.Shared, initial_position=EARLIEST
        )
        exclusive = client.subscribe(topic, "exclusive", initial_position=EARLIEST)
        producer = client.create_producer(topic, batching_enabled=False)
        ids = [producer.send(f"m{n}".encode()) for n in range(10)]
        p = [(i.ledger_id(), i.entry_id()) for i in ids]
        assert len(receive_all(shared, 10, ack=False)) == 10
        assert len(receive_all(exclusive, 10, ack=False)) == 10
        for subscription in ("shared", "exclusive"):
            answer = await admin.sync_subscription(
                name, subscription, mark_delete=p[1], ranges=[(p[3], p[5])], replicated=True
            )
            assert answer == {"markDelete": doc(p[1]), "rangesCount": 1, "created": False}
        _, stats = admin_call(admin_url(cluster), "GET", stats_path(topic))
        for subscription in ("shared", "exclusive"):
            assert len(stats["subscriptions"][subscription]["consumers"]) == 1, "disconnected"
            assert stats["subscriptions"][subscription]["msgBacklog"] == 5
            assert stats["subscriptions"][subscription]["isReplicated"] is True
        for consumer in (shared, exclusive):
            consumer.redeliver_unacknowledged_messages()
            again = sorted(m.data() for m in receive_all(consumer, 5))
            assert again == [b"m2", b"m6", b"m7", b"m8", b"m9"]
            assert receive_none(consumer) == []
        state = await existing_state(admin, topic, "shared")
        assert (state.consumers, state.sub_type, state.replicated) == (1, "Shared", True)
        shared.close()
        exclusive.close()
    for subscription in ("shared", "exclusive"):
        assert (await existing_state(admin, topic, subscription)).mark_delete == p[9]


async def test_the_client_splits_a_large_sync_and_sync_state_bounds_its_ranges(cluster, admin):
    """Every other entry of 20,010 acknowledged: 10,005 ranges, more than one request
    carries; sync-state reports the lowest 10,000 and says it left some out."""
    topic = unique_topic("large")
    name = TopicName.parse(topic)
    link = PulsarLink(cluster.url)
    try:
        p = await publish(link, topic, [b"x"] * 20_010)
    finally:
        await link.close()
    assert len({ledger for ledger, _ in p}) == 1
    wanted = [(p[n], p[n]) for n in range(1, len(p), 2)]
    answer = await admin.sync_subscription(name, "big", ranges=wanted)
    assert answer == {"markDelete": doc(before(p[0])), "rangesCount": 10_005, "created": True}
    state = await existing_state(admin, topic, "big")
    assert len(state.ranges) == 10_000 and state.ranges_truncated
    assert state.ranges[0] == (p[1], p[1]) and state.ranges[-1] == (p[19_999], p[19_999])
    answer = await admin.sync_subscription(name, "big", ranges=[(p[0], p[-1])])
    assert answer == {"markDelete": doc(p[-1]), "rangesCount": 0, "created": False}


# --- the replicated flag, across a restart ------------------------------------------------
def subscribe_with_property(url: str, topic: str, subscription: str) -> RawConnection:
    """SUBSCRIBE with the subscription property georep.replicated=true (pulsar-client's
    Python API cannot set subscription properties)."""
    raw = RawConnection(url)
    command = commands.build(
        Type.SUBSCRIBE,
        topic=topic,
        subscription=subscription,
        sub_type=pb.Subscribe.EXCLUSIVE,
        consumer_id=1,
        request_id=1,
        initial_position=pb.Subscribe.EARLIEST,
    )
    command.subscribe.subscription_properties.add(key="georep.replicated", value="true")
    raw.send(connect_frame() + frames.encode_command(command))
    replies, _ = raw.replies(1.0)
    assert Type.SUCCESS in [reply.type for reply in replies], replies
    return raw


async def test_the_replicated_flag_shows_in_sync_state_and_stats_and_survives_a_restart(
    tmp_path,
):
    process = ClusterProcess(tmp_path / "cluster", name="R")
    process.start()
    topic = unique_topic("flag")
    name = TopicName.parse(topic)
    admin = ClusterAdminClient(admin_url(process), cluster_name="R")
    try:
        with open_client(process.url) as client:
            replicated = client.subscribe(
                topic,
                "replicated",
                initial_position=EARLIEST,
                replicate_subscription_state_enabled=True,
            )
            plain = client.subscribe(topic, "plain", initial_position=EARLIEST)
            producer = client.create_producer(topic, batching_enabled=False)
            first = [producer.send(f"a{n}".encode()) for n in range(3)]
            replicated.close()
            again = client.subscribe(topic, "replicated")  # without the flag: kept
            again.close()
            plain.close()
            producer.close()
        raw = subscribe_with_property(process.url, topic, "by-property")
        raw.close()
        await admin.sync_subscription(name, "by-sync", replicated=True)

        async def flags() -> dict[str, bool]:
            state = await admin.sync_state(name)
            return {sub: s.replicated for sub, s in state["subscriptions"].items()}

        expected = {"replicated": True, "plain": False, "by-property": True, "by-sync": True}
        assert await flags() == expected
        _, stats = admin_call(admin_url(process), "GET", stats_path(topic))
        assert {sub: s["isReplicated"] for sub, s in stats["subscriptions"].items()} == expected
        _, internal = admin_call(admin_url(process), "GET", stats_path(topic, "internalStats"))
        assert internal["cursors"]["replicated"]["properties"]["georep.replicated"] == 1

        await admin.close()
        assert process.terminate() == 0
        process.start()  # the topic is not loaded: sync-state loads it
        admin = ClusterAdminClient(admin_url(process), cluster_name="R")
        assert await flags() == expected
        _, stats = admin_call(admin_url(process), "GET", stats_path(topic))
        assert stats["subscriptions"]["replicated"]["isReplicated"] is True

        # The restart started a new ledger: a range spanning the two ledgers.
        with open_client(process.url) as client:
            producer = client.create_producer(topic, batching_enabled=False)
            second = [producer.send(f"b{n}".encode()) for n in range(3)]
            producer.close()
        p = [Position(i.ledger_id(), i.entry_id()) for i in first + second]
        assert p[2][0] != p[3][0]
        answer = await admin.sync_subscription(name, "span", ranges=[(p[1], p[4])])
        assert answer == {"markDelete": doc(before(p[0])), "rangesCount": 1, "created": True}
        state = (await admin.sync_state(name))["subscriptions"]["span"]
        assert state.ranges == ((p[1], p[4]),)
        answer = await admin.sync_subscription(name, "span", ranges=[(p[0], p[0])])
        assert answer == {"markDelete": doc(p[4]), "rangesCount": 0, "created": False}
    finally:
        with contextlib.suppress(Exception):
            await admin.close()
        process.kill()
