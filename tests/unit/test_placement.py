"""Ensemble placement (storage/client/placement.py): random among the writable bookies,
chosen from a list read at most ``cache_s`` ago and shared by concurrent callers; a list
too short is read again before refusing, and a replacement always reads afresh."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import pytest

from georep.storage.client.placement import EnsemblePlacementPolicy
from georep.storage.errors import NotEnoughBookies


@dataclass
class Listed:
    address: str


class FakeBookies:
    """The two reads placement makes, counted; each takes a turn of the loop."""

    def __init__(self, addresses: list[str]) -> None:
        self.addresses = list(addresses)
        self.read_only: set[str] = set()
        self.reads = 0

    async def list_bookies(self, alive_only: bool = False) -> list[Listed]:
        self.reads += 1
        await asyncio.sleep(0)
        return [Listed(a) for a in self.addresses]

    async def read_only_bookies(self) -> set[str]:
        await asyncio.sleep(0)
        return set(self.read_only)


def placement(bookies: FakeBookies, clock) -> EnsemblePlacementPolicy:
    return EnsemblePlacementPolicy(
        bookies,  # type: ignore[arg-type]  # the two methods placement calls
        rng=random.Random(7),
        clock=clock,
        cache_s=1.0,
    )


async def test_one_read_serves_every_ensemble_within_the_window(manual_clock):
    bookies = FakeBookies(["b0", "b1", "b2"])
    policy = placement(bookies, manual_clock)
    ensembles = await asyncio.gather(*(policy.new_ensemble(2) for _ in range(50)))
    assert bookies.reads == 1
    assert all(len(set(e)) == 2 and set(e) <= {"b0", "b1", "b2"} for e in ensembles)
    manual_clock.advance(0.5)
    await policy.new_ensemble(2)
    assert bookies.reads == 1
    manual_clock.advance(0.6)  # 1.1 s after the read
    bookies.read_only = {"b2"}
    for _ in range(20):
        assert "b2" not in await policy.new_ensemble(2)
    assert bookies.reads == 2


async def test_a_list_too_short_is_read_again_before_refusing(manual_clock):
    bookies = FakeBookies(["b0", "b1"])
    policy = placement(bookies, manual_clock)
    await policy.new_ensemble(2)
    bookies.addresses.append("b2")  # registered since the read
    assert len(await policy.new_ensemble(3)) == 3
    assert bookies.reads == 2
    bookies.addresses = ["b0"]
    manual_clock.advance(1.1)
    with pytest.raises(NotEnoughBookies):
        await policy.new_ensemble(3)


async def test_a_replacement_is_chosen_from_a_fresh_read(manual_clock):
    bookies = FakeBookies(["b0", "b1", "b2", "b3"])
    policy = placement(bookies, manual_clock)
    await policy.new_ensemble(3)
    bookies.read_only = {"b3"}
    with pytest.raises(NotEnoughBookies):
        await policy.replace(["b0", "b1", "b2"], ["b0"])
    assert bookies.reads == 2


async def test_callers_waiting_while_a_short_list_is_read_again_share_that_read(manual_clock):
    bookies = FakeBookies(["b0", "b1"])
    policy = placement(bookies, manual_clock)
    await policy.new_ensemble(2)
    bookies.addresses.append("b2")
    ensembles = await asyncio.gather(*(policy.new_ensemble(3) for _ in range(20)))
    assert all(sorted(e) == ["b0", "b1", "b2"] for e in ensembles)
    assert bookies.reads == 2
