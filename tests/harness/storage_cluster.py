"""A real storage cluster for tests: bookie processes, a SQLite metadata store, and
raw access to each bookie (faults, reads) for checking what is really stored."""

from __future__ import annotations

import json
from pathlib import Path

from georep.runtime.processes import ManagedProcess, start_bookie
from georep.storage import bookie_protocol
from georep.storage import entry as entry_format
from georep.storage.client.bookie_client import BookieClient
from georep.storage.client.bookkeeper import BookKeeper
from georep.storage.meta.store import MetadataStore

LEASE_S = 3.0  # long enough that a bookie starved by a loaded machine still renews


class StorageCluster:
    def __init__(self, root: Path, bookie_args: tuple[str, ...] = ()) -> None:
        self.root = root
        self.bookie_args = bookie_args
        self.url = f"sqlite:///{root / 'metadata.db'}"
        self.store: MetadataStore | None = None
        self.bookies: dict[str, ManagedProcess] = {}
        self.dirs: dict[str, Path] = {}
        self._clients: list[BookKeeper] = []
        self._raw: dict[str, BookieClient] = {}

    async def start(self, bookies: int) -> StorageCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self.store = await MetadataStore.open(self.url)
        for n in range(bookies):
            await self.add_bookie(n)
        return self

    async def add_bookie(self, n: int, port: int = 0) -> str:
        directory = self.root / f"bookie-{n}"
        process = await start_bookie(
            directory,
            port=port,
            metadata_url=self.url,
            extra=["--fault-injection", "--lease-s", str(LEASE_S), *self.bookie_args],
        )
        self.bookies[process.detail] = process
        self.dirs[process.detail] = directory
        return process.detail

    async def kill(self, address: str) -> None:
        process = self.bookies[address]
        process.kill()
        await process.wait()

    async def restart(self, address: str) -> None:
        directory = self.dirs[address]
        n = int(directory.name.split("-")[1])
        port = int(address.rsplit(":", 1)[1])
        del self.bookies[address]
        await self.add_bookie(n, port)

    def client(self, **options) -> BookKeeper:
        assert self.store is not None, "start() opens the metadata store"
        bk = BookKeeper(self.store.ledgers, self.store.bookies, **options)
        self._clients.append(bk)
        return bk

    def _raw_client(self, address: str) -> BookieClient:
        if address not in self._raw:
            self._raw[address] = BookieClient(address, timeout_ms=3000)
        return self._raw[address]

    async def fault(self, address: str, **spec) -> None:
        answer = await self._raw_client(address).request(
            bookie_protocol.FaultRequest(0, json.dumps(spec).encode())
        )
        assert answer.status == bookie_protocol.Status.OK, answer

    async def stored(self, address: str, ledger_id: int, entry_id: int) -> bytes | None:
        """The entry as bookie ``address`` holds it, or None when it does not."""
        answer = await self._raw_client(address).request(
            bookie_protocol.ReadRequest(0, ledger_id, entry_id)
        )
        if answer.status in (
            bookie_protocol.Status.NO_SUCH_ENTRY,
            bookie_protocol.Status.NO_SUCH_LEDGER,
        ):
            return None
        assert answer.status == bookie_protocol.Status.OK, answer
        assert isinstance(answer, bookie_protocol.ReadResponse)
        entry_format.verify(answer.data, ledger_id, entry_id)
        return answer.data

    async def raw_add(
        self, address: str, ledger_id: int, entry_id: int, data: bytes, recovery: bool = False
    ) -> bookie_protocol.Status:
        answer = await self._raw_client(address).request(
            bookie_protocol.AddRequest(0, ledger_id, entry_id, recovery, data)
        )
        return answer.status

    async def stop(self) -> None:
        for client in self._raw.values():
            await client.close()
        for bk in self._clients:
            await bk.close()
        for process in self.bookies.values():
            process.kill()
            await process.wait()
        if self.store is not None:
            await self.store.close()
