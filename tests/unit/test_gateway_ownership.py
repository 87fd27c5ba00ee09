"""Ownership of topic partitions among several gateway instances (gateway/ownership.py):
the members' rows in the metadata store, the assignment, and the rule that nobody starts
a partition another instance may still run -- checked over random interleavings."""

from __future__ import annotations

import collections
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from georep.gateway.meta.members import GatewayMember
from georep.gateway.ownership import Ownership, owner_of
from georep.storage.errors import MetadataUnavailable

LEASE_S = 3.0
HEARTBEAT_S = 0.5
PARTITIONS = [f"persistent://t/ns/topic-partition-{i}" for i in range(60)]


# --- the rows ---------------------------------------------------------------------------
async def test_heartbeats_list_live_members_with_their_views(gateway_meta, manual_clock):
    store = gateway_meta
    first = await store.members.member_heartbeat("A", "a1", LEASE_S, [])
    assert [(m.instance, m.view) for m in first] == [("a1", frozenset())]
    manual_clock.advance(1)
    both = await store.members.member_heartbeat("A", "a2", LEASE_S, ["a2", "a1"])
    assert [(m.instance, sorted(m.view)) for m in both] == [("a1", []), ("a2", ["a1", "a2"])]
    assert await store.members.member_heartbeat("B", "b1", LEASE_S, []) != both  # per cluster
    manual_clock.advance(2.5)  # a1's lease ran out, a2's has 0.5 s left
    assert [m.instance for m in await store.members.live_members("A")] == ["a2"]
    joined = (await store.members.live_members("A"))[0].joined_at
    manual_clock.advance(0.4)
    renewed = await store.members.member_heartbeat("A", "a2", LEASE_S, ["a2"])
    assert renewed[0].joined_at == joined  # renewed in time: the same membership
    back = await store.members.member_heartbeat("A", "a1", LEASE_S, [])
    assert next(m for m in back if m.instance == "a1").joined_at == manual_clock()  # rejoined
    await store.members.member_leave("A", "a2")
    assert [m.instance for m in await store.members.live_members("A")] == ["a1"]


# --- the assignment ---------------------------------------------------------------------
def test_each_of_three_owns_about_a_third_and_a_newcomer_takes_only_its_share() -> None:
    partitions = [f"persistent://t/ns/t{i}-partition-{j}" for i in range(1000) for j in range(10)]
    three = {"gw-1", "gw-2", "gw-3"}
    owners = {p: owner_of(p, three) for p in partitions}
    shares = collections.Counter(owners.values())
    assert all(abs(n - len(partitions) / 3) < 0.2 * len(partitions) / 3 for n in shares.values())
    four = {p: owner_of(p, three | {"gw-4"}) for p in partitions}
    moved = [p for p in partitions if four[p] != owners[p]]
    assert {four[p] for p in moved} == {"gw-4"}, "only partitions going to the newcomer move"
    assert owner_of("x", []) is None


# --- the rule, over random interleavings ------------------------------------------------
class FakeStore:
    """The two calls ownership makes, on a clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0
        self.rows: dict[str, tuple[frozenset[str], float]] = {}
        self.down = False

    async def member_heartbeat(
        self, cluster: str, instance: str, lease_s: float, view: Iterable[str]
    ) -> list[GatewayMember]:
        if self.down:
            raise MetadataUnavailable("metadata database unavailable: test")
        self.rows[instance] = (frozenset(view), self.now + lease_s)
        return [
            GatewayMember(name, view, 0.0, expires)
            for name, (view, expires) in sorted(self.rows.items())
            if expires > self.now
        ]

    async def member_leave(self, cluster: str, instance: str) -> None:
        self.rows.pop(instance, None)


class Instance:
    """A manager's use of ownership: stop what is not its own, publish, start what it may."""

    def __init__(self, name: str, store: FakeStore) -> None:
        self.ownership = Ownership(
            store,
            cluster="A",
            instance=name,
            lease_s=LEASE_S,
            heartbeat_s=HEARTBEAT_S,
            on_change=lambda: None,
            clock=lambda: store.now,
        )
        self.running: set[str] = set()
        self.alive = True

    async def step(self) -> None:
        own = self.ownership
        await own.heartbeat()
        self.running = {p for p in self.running if own.target(p)}
        await own.publish()
        self.running |= {p for p in PARTITIONS if own.may_run(p)}


ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["step", "step", "step", "tick", "kill", "stop", "join"]),
        st.integers(0, 3),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(actions=ACTIONS)
async def test_no_partition_ever_runs_on_two_live_instances(actions) -> None:
    store = FakeStore()
    instances: list[Instance] = [Instance("gw-0", store)]
    for action, which in actions:
        alive = [i for i in instances if i.alive]
        chosen = alive[which % len(alive)] if alive else None
        if action == "step" and chosen is not None:
            await chosen.step()
        elif action == "tick":
            store.now += HEARTBEAT_S
        elif action == "kill" and chosen is not None:
            chosen.alive, chosen.running = False, set()  # kill -9: its row stays to expire
        elif action == "stop" and chosen is not None:
            chosen.alive, chosen.running = False, set()
            await chosen.ownership.stop()
        elif action == "join" and len(instances) < 6:
            instances.append(Instance(f"gw-{len(instances)}", store))
        owners = collections.Counter(p for i in instances if i.alive for p in i.running)
        assert [p for p, n in owners.items() if n > 1] == []
    # Left alone long enough, the live instances run every partition between them.
    for _ in range(int(LEASE_S / HEARTBEAT_S) + 2):
        store.now += HEARTBEAT_S
        for instance in [i for i in instances if i.alive]:
            await instance.step()
    alive = [i for i in instances if i.alive]
    if alive:
        assert sorted(p for i in alive for p in i.running) == sorted(PARTITIONS)


async def test_an_instance_that_cannot_renew_stops_everything_before_its_lease_ends() -> None:
    store = FakeStore()
    instance, other = Instance("gw-0", store), Instance("gw-1", store)
    changes = []
    instance.ownership._on_change = lambda: changes.append(store.now)
    for _ in range(3):
        await other.step()
        await instance.step()
    assert instance.running and instance.running | other.running == set(PARTITIONS)
    store.down = True
    store.now += HEARTBEAT_S
    await instance.step()
    assert not instance.ownership.fenced and instance.ownership.last_error
    store.now += LEASE_S - 2 * HEARTBEAT_S  # lease_s - heartbeat_s since the last renewal
    await instance.step()
    assert instance.ownership.fenced and instance.running == set()
    assert changes and changes[-1] < LEASE_S  # before the lease the others see runs out
    store.down = False
    for _ in range(3):
        await other.step()
        await instance.step()  # renewed: a member again, its partitions back
    assert instance.running and instance.running | other.running == set(PARTITIONS)


async def test_an_instance_alone_that_cannot_renew_keeps_running() -> None:
    store = FakeStore()
    alone = Instance("gw-0", store)
    await alone.step()
    store.down = True
    for _ in range(int(LEASE_S / HEARTBEAT_S) + 2):
        store.now += HEARTBEAT_S
        await alone.step()
    assert not alone.ownership.fenced and alone.running == set(PARTITIONS)
    assert alone.ownership.last_error


@pytest.mark.parametrize("lease_s", [0.5, 301])
def test_lease_outside_its_bounds_is_refused(lease_s) -> None:
    from georep.gateway.config import parse
    from georep.runtime.console import ConfigError

    document = {
        "gateway": {"lease_s": lease_s},
        "local": {"name": "A", "service_url": "pulsar://127.0.0.1:1", "admin_url": "http://x:1"},
    }
    with pytest.raises(ConfigError, match="lease_s"):
        parse(document)


def test_heartbeat_longer_than_a_quarter_lease_and_bad_instance_names_are_refused() -> None:
    from georep.gateway.config import parse
    from georep.runtime.console import ConfigError

    local = {"name": "A", "service_url": "pulsar://127.0.0.1:1", "admin_url": "http://x:1"}
    with pytest.raises(ConfigError, match="heartbeat_s"):
        parse({"gateway": {"lease_s": 4, "heartbeat_s": 1.5}, "local": local})
    with pytest.raises(ConfigError, match="instance"):
        parse({"gateway": {"instance": "a b"}, "local": local})
    config = parse({"gateway": {"instance": "gw-a1", "lease_s": 10}, "local": local})
    assert (config.instance, config.lease_s, config.heartbeat_s) == ("gw-a1", 10.0, 0.5)


def test_command_line_gives_an_instance_its_own_address_and_name() -> None:
    from georep.gateway.config import parse, with_overrides
    from georep.runtime.console import ConfigError

    local = {"name": "A", "service_url": "pulsar://127.0.0.1:1", "admin_url": "http://x:1"}
    config = parse({"gateway": {"instance": "a1"}, "local": local})
    second = with_overrides(config, listen="127.0.0.1:8091", instance="a2")
    assert (second.listen_port, second.instance, second.metadata_url) == (
        8091,
        "a2",
        config.metadata_url,
    )
    with pytest.raises(ConfigError, match="listen"):
        with_overrides(config, listen="nowhere")
