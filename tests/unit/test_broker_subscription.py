"""A subscription over a managed cursor that owns its acknowledgement state: what it
takes is in effect at once, ``flush`` (what an ACK_RESPONSE, a CLOSE_CONSUMER answer,
an admin acknowledge and a sync wait for) returns once it is durable or once the cursor
gave up after its retries, and a fenced cursor takes nothing without raising."""

from __future__ import annotations

from typing import Any, cast

import pytest

from georep import limits
from georep.broker.rate_meter import RateMeter
from georep.broker.subscription import Subscription, SubscriptionTopic
from georep.domain.position import Position
from georep.storage.managed_ledger.cursor import ManagedCursor
from tests.unit.test_managed_cursor_persistence import FakeLog, new_cursor

P = Position


class FakeTopic:
    """What a subscription asks of its topic, over ``log``."""

    def __init__(self, log: FakeLog) -> None:
        self.name = "persistent://t/n/x"
        self.ledger = log
        self.rate_window_s = 60
        self.rate_out = RateMeter(60)
        self.changed: list[str] = []

    def subscription_changed(self, name: str) -> None:
        self.changed.append(name)

    async def delete_subscription(self, name: str) -> None:
        pass


async def subscription() -> tuple[FakeLog, Subscription, ManagedCursor]:
    log, cursor = await new_cursor()

    def no_dispatcher(*_: Any) -> Any:
        raise AssertionError("no consumer here")

    topic = cast(SubscriptionTopic, FakeTopic(log))
    return log, Subscription(topic, "s", cursor, dispatcher_factory=no_dispatcher), cursor


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "cursor_write_retry_s", 0.0)


async def test_taken_at_once_durable_after_flush() -> None:
    log, live, cursor = await subscription()
    live.acknowledge_synced(P(4, 1), [(P(4, 3), P(4, 4))], {P(4, 6): 0b10})
    live.acknowledge_entries([P(4, 5)])
    assert live.is_acknowledged(P(4, 1)) and live.is_acknowledged(P(4, 5))
    assert not live.is_acknowledged(P(4, 2))
    assert cursor.batch_bits(P(4, 6)) == 0b10
    assert log.writes == 0  # nothing persisted yet: the cursor's loop has not run
    await live.flush()
    assert log.writes >= 1
    assert cursor.stats()["persisted_mark_delete_position"] == "4:1"


async def test_flush_returns_once_the_cursor_gives_up() -> None:
    log, live, cursor = await subscription()
    log.failures = 10 * limits.cursor_write_retries_max
    live.acknowledge_entries([P(4, 0)])
    await live.flush()  # logged, not raised: the entry is delivered again after a restart
    assert cursor.stats()["persist_failures"] == limits.cursor_write_retries_max
    assert live.is_acknowledged(P(4, 0))  # in effect all the same


async def test_a_fenced_cursor_takes_nothing_and_nothing_raises() -> None:
    log, live, _ = await subscription()
    log.fenced = True
    live.acknowledge_entries([P(4, 0)])
    await live.flush()
    live.acknowledge_entries([P(4, 1)])  # the cursor is fenced now: refused, logged
    assert not live.is_acknowledged(P(4, 1))
    await live.flush()


async def test_a_marker_after_the_mdp_is_acknowledged_when_the_mdp_reaches_it() -> None:
    _, live, cursor = await subscription()
    live.note_marker(P(4, 2))  # (4, 0) and (4, 1) are open: it waits
    assert not live.is_acknowledged(P(4, 2))
    live.acknowledge_entries([P(4, 1)])
    assert cursor.mark_delete_position == P(4, -1)
    live.acknowledge_entries([P(4, 0)])
    assert cursor.mark_delete_position == P(4, 2)  # over the marker at once
