"""Choosing bookies for an ensemble: random among the writable ones.

Writable = registered with a live lease in the metadata store and not saying it is
read-only (``meta/bookies.py``). Random placement spreads ledgers over the bookies; a
rack- or region-aware policy would subclass this.

A new ensemble is chosen from the writable bookies as read at most
``limits.placement_writable_cache_s`` ago, one read shared by every caller meanwhile:
a topic's first load creates a ledger for its log and one per cursor, and reading the
bookies and their leases for each was most of the metadata store's reads when thousands
of topics load at once. Leases already make the list seconds stale (a bookie killed
stays listed until its lease runs out), and a bookie that fails an add is replaced in
its ensemble; a list too short for the ensemble is read again before refusing, and a
replacement is always chosen from a fresh read.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterable, Sequence

from georep import limits
from georep.storage.errors import NotEnoughBookies
from georep.storage.meta.bookies import BookieRepository


class EnsemblePlacementPolicy:
    def __init__(
        self,
        bookies: BookieRepository,
        *,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        cache_s: float = limits.placement_writable_cache_s,
    ) -> None:
        self._bookies = bookies
        self._rng = rng or random.Random()
        self._clock = clock
        self._cache_s = cache_s
        self._recent: tuple[float, list[str]] | None = None  # (read at, writable)
        self._reading = asyncio.Lock()

    async def writable_bookies(self) -> list[str]:
        read_only = await self._bookies.read_only_bookies()
        return [
            bookie.address
            for bookie in await self._bookies.list_bookies(alive_only=True)
            if bookie.address not in read_only
        ]

    async def _recent_writable(self, *, newer_than: float | None = None) -> tuple[float, list[str]]:
        """(when it was read, the writable bookies): the last read if it is recent (and
        later than ``newer_than``), else a new one; callers waiting meanwhile share it."""
        async with self._reading:
            recent = self._recent
            if recent is not None and self._clock() - recent[0] < self._cache_s:
                if newer_than is None or recent[0] > newer_than:
                    return recent
            read_at = self._clock()
            self._recent = (read_at, await self.writable_bookies())
            return self._recent

    async def new_ensemble(self, ensemble_size: int) -> list[str]:
        read_at, writable = await self._recent_writable()
        if len(writable) < ensemble_size:  # read again, unless someone just did
            _, writable = await self._recent_writable(newer_than=read_at)
        if len(writable) < ensemble_size:
            raise NotEnoughBookies(
                f"need {ensemble_size} writable bookies, have {len(writable)}: {writable}"
            )
        return self._rng.sample(writable, ensemble_size)

    async def replace(
        self, ensemble: Sequence[str], failed: Iterable[str], exclude: Iterable[str] = ()
    ) -> list[str]:
        """``ensemble`` with every bookie of ``failed`` replaced by a writable bookie that
        is not in the ensemble nor in ``exclude``."""
        failed = set(failed)
        banned = set(ensemble) | failed | set(exclude)
        candidates = [b for b in await self.writable_bookies() if b not in banned]
        if len(candidates) < len(failed):
            raise NotEnoughBookies(
                f"need {len(failed)} replacement bookies for {sorted(failed)}, "
                f"have {len(candidates)}"
            )
        chosen = iter(self._rng.sample(candidates, len(failed)))
        return [next(chosen) if bookie in failed else bookie for bookie in ensemble]
