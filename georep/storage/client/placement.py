"""Choosing bookies for an ensemble: random among the writable ones.

Writable = registered with a live lease in the metadata store and not saying it is
read-only (``meta/bookies.py``). Random placement spreads ledgers over the bookies; a
rack- or region-aware policy would subclass this.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from georep.storage.errors import NotEnoughBookies
from georep.storage.meta.bookies import BookieRepository


class EnsemblePlacementPolicy:
    def __init__(self, bookies: BookieRepository, *, rng: random.Random | None = None) -> None:
        self._bookies = bookies
        self._rng = rng or random.Random()

    async def writable_bookies(self) -> list[str]:
        read_only = await self._bookies.read_only_bookies()
        return [
            bookie.address
            for bookie in await self._bookies.list_bookies(alive_only=True)
            if bookie.address not in read_only
        ]

    async def new_ensemble(self, ensemble_size: int) -> list[str]:
        writable = await self.writable_bookies()
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
