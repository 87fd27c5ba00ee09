"""Reading a ledger: confirmed reads up to LAC, in entry order.

Each entry is asked of one replica of its write set first. If that replica fails the
next one is asked at once; if it is merely slow (no answer within the speculative
timeout) the next one is asked too and the first valid answer wins. Every answer is
checked (ids and CRC32C) before it is accepted: a corrupt replica counts as a failed one.

Example, E=3 Qw=2 ensemble (b1, b2, b3): entry 4 has write set (1, 2), so b2 is asked;
if b2 has not answered after 200 ms b3 is asked as well.
"""

from __future__ import annotations

import asyncio
import logging

from georep import limits
from georep.storage import bookie_protocol
from georep.storage import entry as entry_format
from georep.storage.client.client_context import ClientContext
from georep.storage.client.distribution_schedule import Quorums
from georep.storage.errors import (
    BookieUnavailable,
    CorruptEntry,
    InvalidArgument,
    NoSuchEntry,
    ReadBeyondLastAddConfirmed,
)
from georep.storage.meta.ledger_metadata import LedgerMetadata

log = logging.getLogger(__name__)


def replicas(metadata: LedgerMetadata, quorums: Quorums, entry_id: int) -> list[str]:
    """Bookies holding ``entry_id`` per ``metadata``, in write-set order."""
    ensemble = metadata.ensemble_for(entry_id)
    return [ensemble[index] for index in quorums.write_set(entry_id)]


class ReadEntryOp:
    """Read one entry from the first replica that has it, speculatively."""

    def __init__(
        self,
        context: ClientContext,
        ledger_id: int,
        entry_id: int,
        bookies: list[str],
        *,
        speculative_timeout_s: float,
    ) -> None:
        self._context = context
        self._ledger_id = ledger_id
        self._entry_id = entry_id
        self._bookies = bookies
        self._speculative_timeout_s = speculative_timeout_s

    async def run(self) -> tuple[entry_format.Entry, bytes]:
        errors: list[str] = []
        missing = 0
        in_flight: set[asyncio.Future[bookie_protocol.Response]] = set()
        owner: dict[asyncio.Future[bookie_protocol.Response], str] = {}
        untried = list(self._bookies)

        def ask_next() -> None:
            bookie = untried.pop(0)
            request = bookie_protocol.ReadRequest(0, self._ledger_id, self._entry_id)
            future = self._context.clients.get(bookie).submit(request)
            in_flight.add(future)
            owner[future] = bookie

        ask_next()
        try:
            while in_flight:
                timeout = self._speculative_timeout_s if untried else None
                done, _ = await asyncio.wait(
                    in_flight, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    ask_next()  # slow replica: race the next one
                    continue
                for future in done:
                    in_flight.discard(future)
                    bookie = owner[future]
                    outcome = self._accept(future, bookie)
                    if isinstance(outcome, tuple):
                        return outcome
                    if outcome == "missing":
                        missing += 1
                    errors.append(f"{bookie}: {outcome}")
                    if untried and not in_flight:
                        ask_next()
        finally:
            for future in in_flight:
                future.cancel()
        if missing == len(self._bookies):
            raise NoSuchEntry(f"ledger {self._ledger_id} entry {self._entry_id}: no replica has it")
        raise BookieUnavailable(
            f"ledger {self._ledger_id} entry {self._entry_id}: every replica failed: "
            + "; ".join(errors)
        )

    def _accept(
        self, future: asyncio.Future[bookie_protocol.Response], bookie: str
    ) -> tuple[entry_format.Entry, bytes] | str:
        if future.exception() is not None:
            return str(future.exception())
        response = future.result()
        if response.status in (
            bookie_protocol.Status.NO_SUCH_ENTRY,
            bookie_protocol.Status.NO_SUCH_LEDGER,
        ):
            return "missing"
        if response.status != bookie_protocol.Status.OK:
            return f"{response.status.name}: {response.error}"
        data = response.data  # type: ignore[attr-defined]  # a READ is answered by a ReadResponse
        try:
            return entry_format.decode(data, self._ledger_id, self._entry_id), data
        except CorruptEntry as error:
            log.error("bookie %s returned a corrupt copy: %s", bookie, error)
            return f"corrupt: {error}"


class ReadHandle:
    """Reads a ledger. For an open ledger, LAC comes from the bookies (``read_lac``)."""

    def __init__(
        self, context: ClientContext, metadata: LedgerMetadata, last_add_confirmed: int
    ) -> None:
        self._context = context
        self.metadata = metadata
        self.quorums = Quorums(metadata.ensemble_size, metadata.write_quorum, metadata.ack_quorum)
        self.last_add_confirmed = last_add_confirmed

    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id

    async def read(self, first: int, last: int) -> list[entry_format.Entry]:
        """Entries ``first..last`` (inclusive), in order; only up to LAC."""
        if last > self.last_add_confirmed:
            raise ReadBeyondLastAddConfirmed(
                f"ledger {self.ledger_id}: asked up to {last}, LAC is {self.last_add_confirmed}"
            )
        return [entry for entry, _ in await self.read_raw(first, last)]

    async def read_raw(self, first: int, last: int) -> list[tuple[entry_format.Entry, bytes]]:
        if first < 0 or last < first:
            raise InvalidArgument(f"bad entry range {first}..{last}")
        if last - first + 1 > limits.read_batch_entries_max:
            raise InvalidArgument(
                f"range {first}..{last} exceeds {limits.read_batch_entries_max} entries"
            )
        gate = asyncio.Semaphore(limits.read_concurrency_max)
        timeout_s = self._context.speculative_read_timeout_ms / 1000

        async def one(entry_id: int) -> tuple[entry_format.Entry, bytes]:
            async with gate:
                op = ReadEntryOp(
                    self._context,
                    self.ledger_id,
                    entry_id,
                    replicas(self.metadata, self.quorums, entry_id),
                    speculative_timeout_s=timeout_s,
                )
                return await op.run()

        return list(await asyncio.gather(*(one(e) for e in range(first, last + 1))))

    async def read_lac(self) -> int:
        """Ask the last segment's bookies for the highest LAC they have seen; LAC can only
        grow. A closed ledger's LAC is its last entry."""
        if self.metadata.is_closed:
            self.last_add_confirmed = self.metadata.last_entry_id
            return self.last_add_confirmed
        ensemble = self.metadata.last_ensemble
        futures = [
            self._context.clients.get(b).submit(bookie_protocol.ReadLacRequest(0, self.ledger_id))
            for b in ensemble
        ]
        answers = await asyncio.gather(*futures, return_exceptions=True)
        for answer in answers:
            if (
                isinstance(answer, bookie_protocol.ReadLacResponse)
                and answer.status == bookie_protocol.Status.OK
            ):
                self.last_add_confirmed = max(self.last_add_confirmed, answer.last_add_confirmed)
        return self.last_add_confirmed
