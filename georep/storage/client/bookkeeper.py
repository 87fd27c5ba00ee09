"""The ledger client: create, open (with or without recovery), delete.

bk = BookKeeper(store.ledgers, store.bookies)
writer = await bk.create_ledger(ensemble_size=3, write_quorum=2, ack_quorum=2)
await writer.add(b"payload")           # confirmed on Qa bookies
await writer.close()
reader = await bk.open_ledger(writer.ledger_id)   # recovers (fences) if still open
entries = await reader.read(0, reader.last_add_confirmed)

The handles and ops it creates get it as their ``client_context.ClientContext`` (bookie clients,
placement, ledger metadata, read timeout) and never import this module.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from georep import limits
from georep.storage.client.bookie_client import BookieClientPool
from georep.storage.client.distribution_schedule import Quorums
from georep.storage.client.ledger_handle import LedgerHandle
from georep.storage.client.ledger_recovery_op import LedgerRecoveryOp
from georep.storage.client.placement import EnsemblePlacementPolicy
from georep.storage.client.read_handle import ReadHandle
from georep.storage.meta.bookies import BookieRepository
from georep.storage.meta.ledger_metadata import LedgerMetadata
from georep.storage.meta.ledgers import LedgerRepository

log = logging.getLogger(__name__)


class BookKeeper:
    """The client of a cluster's bookies; as a ``client_context.ClientContext`` it is what each of
    its handles and ops is given."""

    def __init__(
        self,
        ledgers: LedgerRepository,
        bookies: BookieRepository,
        *,
        placement: EnsemblePlacementPolicy | None = None,
        request_timeout_ms: float = limits.bookie_request_timeout_ms_default,
        speculative_read_timeout_ms: float = limits.speculative_read_timeout_ms_default,
    ) -> None:
        self.ledgers = ledgers
        self.placement = placement or EnsemblePlacementPolicy(bookies)
        self.clients = BookieClientPool(timeout_ms=request_timeout_ms)
        self.speculative_read_timeout_ms = speculative_read_timeout_ms

    async def create_ledger(
        self,
        *,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        custom: Mapping[str, str] | None = None,
    ) -> LedgerHandle:
        """A new OPEN ledger on ``ensemble_size`` writable bookies; raises
        :class:`NotEnoughBookies` when there are fewer."""
        Quorums(ensemble_size, write_quorum, ack_quorum)  # validates E >= Qw >= Qa >= 1
        ensemble = await self.placement.new_ensemble(ensemble_size)
        metadata = await self.ledgers.create_ledger(
            ensemble_size=ensemble_size,
            write_quorum=write_quorum,
            ack_quorum=ack_quorum,
            ensemble=ensemble,
            custom=custom,
        )
        log.debug("created ledger %d on %s", metadata.ledger_id, ensemble)
        return LedgerHandle(self, metadata)

    async def open_ledger(self, ledger_id: int, *, recovery: bool = True) -> ReadHandle:
        """Open for reading. With ``recovery`` an unclosed ledger is fenced and closed
        first (its writer gets LedgerFenced); without, the ledger is read while its
        writer goes on, up to the LAC the bookies report."""
        if recovery:
            metadata = await LedgerRecoveryOp(self, ledger_id).run()
            return ReadHandle(self, metadata, metadata.last_entry_id)
        metadata = await self.ledgers.get_ledger(ledger_id)
        handle = ReadHandle(self, metadata, metadata.last_entry_id)
        await handle.read_lac()
        return handle

    async def recover_ledger(self, ledger_id: int) -> LedgerMetadata:
        """Fence and close ``ledger_id``; returns its CLOSED metadata."""
        return await LedgerRecoveryOp(self, ledger_id).run()

    async def delete_ledger(self, ledger_id: int) -> None:
        """Remove the ledger from the metadata store; bookies collect its data later."""
        await self.ledgers.delete_ledger(ledger_id)

    async def close(self) -> None:
        await self.clients.close()
