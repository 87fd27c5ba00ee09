"""Shared helpers for tests that need bookies: real processes, in-process, a raw client.

Real process (kill -9, restart on the same directory and port)::

    with BookieProcess(tmp_path / "b1", fault_injection=True) as bookie:
        address = bookie.address           # "127.0.0.1:PORT", learnt from BOOKIE_READY
        bookie.kill()                       # SIGKILL, no goodbye
        bookie.start()                      # same dir, same port

In-process (shares the test's event loop; pass a metadata store to share one)::

    async with running_bookie(tmp_path / "b1", fsync=False) as bookie:
        ...

Raw client (one request, one response; no retries, no quorum logic)::

    response = await request(address, AddRequest(0, 7, 0, data=make_entry(7, 0, b"x")))
    async with RawClient(address) as client:
        await client.send(...); response = await client.receive()
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from georep.runtime.awaiting import within
from georep.storage import bookie_protocol, entry
from georep.storage.bookie.bookie import Bookie, BookieConfig
from georep.storage.bookie.main import READY_PREFIX

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
REPO_ROOT = Path(__file__).resolve().parents[2]


def make_entry(
    ledger_id: int,
    entry_id: int,
    payload: bytes = b"payload",
    *,
    lac: int = -1,
    length: int | None = None,
) -> bytes:
    """Entry bytes as a ledger client would build them."""
    if length is None:
        length = len(payload) * (entry_id + 1)
    return entry.encode(ledger_id, entry_id, lac, length, payload)


def add_request(
    ledger_id: int,
    entry_id: int,
    payload: bytes = b"payload",
    *,
    lac: int = -1,
    recovery: bool = False,
    request_id: int = 0,
) -> bookie_protocol.AddRequest:
    return bookie_protocol.AddRequest(
        request_id, ledger_id, entry_id, recovery, make_entry(ledger_id, entry_id, payload, lac=lac)
    )


# --- real bookie processes ---------------------------------------------------------


class BookieProcess:
    """``georep bookie`` as a child process."""

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int = 0,
        fsync: bool = True,
        fault_injection: bool = False,
        metadata_url: str | None = None,
        extra_args: tuple[str, ...] = (),
        log_level: str = "INFO",
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.fsync = fsync
        self.fault_injection = fault_injection
        self.metadata_url = metadata_url
        self.extra_args = extra_args
        self.log_level = log_level
        self.log_path = self.data_dir.with_name(self.data_dir.name + ".log")
        self.process: subprocess.Popen[bytes] | None = None
        self.address = ""

    def command(self) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "georep",
            "--log-level",
            self.log_level,
            "bookie",
            "--dir",
            str(self.data_dir),
            "--port",
            str(self.port),
        ]
        if not self.fsync:
            command.append("--no-fsync")
        if self.fault_injection:
            command.append("--fault-injection")
        if self.metadata_url:
            command += ["--metadata", self.metadata_url]
        return command + list(self.extra_args)

    def start(self) -> str:
        """Start (or restart on the same dir and port); return the address once ready."""
        if self.process is not None and self.process.poll() is None:
            raise RuntimeError("bookie process already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log_file = open(self.log_path, "ab")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        try:
            self.process = subprocess.Popen(
                self.command(), stdout=subprocess.PIPE, stderr=log_file, env=env
            )
        finally:
            log_file.close()
        self.address = self._wait_ready()
        self.port = int(self.address.rsplit(":", 1)[1])
        return self.address

    def _wait_ready(self) -> str:
        process = self.process
        assert process is not None and process.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise RuntimeError(f"bookie not ready in {READY_TIMEOUT_S}s:\n{self.log_tail()}")
            readable, _, _ = select.select([process.stdout], [], [], remaining)
            if not readable:
                continue
            line = process.stdout.readline().decode(errors="replace").strip()
            if not line:
                code = process.wait()
                self._close_pipes()
                raise RuntimeError(f"bookie exited with {code} before ready:\n{self.log_tail()}")
            if line.startswith(READY_PREFIX + " "):
                return line.split(" ", 1)[1]

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: the process gets no chance to flush, checkpoint or unregister."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self._close_pipes()

    def stop(self) -> int:
        """SIGTERM and wait: a clean stop (journal committed, checkpoint written)."""
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"bookie did not stop on SIGTERM:\n{self.log_tail()}") from None
        self._close_pipes()
        return code

    def _close_pipes(self) -> None:
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> BookieProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


# --- in-process bookies --------------------------------------------------------------


@contextlib.asynccontextmanager
async def running_bookie(
    data_dir: Path, *, metadata_store: Any = None, **config: Any
) -> AsyncIterator[Bookie]:
    """A bookie in this event loop, stopped cleanly on exit; with ``metadata_store`` it
    registers in that store's bookies and collects garbage by its ledgers."""
    repositories = (
        {}
        if metadata_store is None
        else {"bookies": metadata_store.bookies, "ledgers": metadata_store.ledgers}
    )
    bookie = Bookie(BookieConfig(data_dir=Path(data_dir), **config), **repositories)
    await bookie.start()
    try:
        yield bookie
    finally:
        await bookie.stop()


# --- raw client ----------------------------------------------------------------------


class RawClient:
    """A bare connection speaking the bookie protocol: send requests, receive responses."""

    def __init__(self, address: str, *, timeout_s: float = 10.0) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._decoder = bookie_protocol.FrameDecoder(responses=True)
        self._pending: list[bookie_protocol.Response] = []
        self._ids = itertools.count(1)

    async def connect(self) -> RawClient:
        host, port = self.address.rsplit(":", 1)
        self._reader, self._writer = await within(
            asyncio.open_connection(host, int(port)), self.timeout_s
        )
        return self

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ConnectionError):
                await self._writer.wait_closed()
            self._writer = None

    async def __aenter__(self) -> RawClient:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def next_id(self) -> int:
        return next(self._ids)

    async def send(self, message: bookie_protocol.Request) -> None:
        await self.send_bytes(bookie_protocol.encode(message))

    async def send_bytes(self, data: bytes) -> None:
        assert self._writer is not None
        self._writer.write(data)
        await self._writer.drain()

    async def receive(self, timeout_s: float | None = None) -> bookie_protocol.Response:
        """The next response; raises ``ConnectionError`` when the bookie closes."""
        assert self._reader is not None
        while not self._pending:
            data = await within(self._reader.read(1 << 16), timeout_s or self.timeout_s)
            if not data:
                raise ConnectionError("bookie closed the connection")
            self._pending.extend(self._decoder.feed(data))  # type: ignore[arg-type]
        return self._pending.pop(0)

    async def request(
        self, message: bookie_protocol.Request, timeout_s: float | None = None
    ) -> bookie_protocol.Response:
        """Send one request and wait for its response (assumes nothing else in flight)."""
        await self.send(message)
        response = await self.receive(timeout_s)
        assert response.request_id == message.request_id, "response to another request"
        return response


async def request(
    address: str, message: bookie_protocol.Request, timeout_s: float = 10.0
) -> bookie_protocol.Response:
    """One request on a fresh connection."""
    async with RawClient(address, timeout_s=timeout_s) as client:
        return await client.request(message)


async def set_faults(address: str, spec: str = "{}") -> bookie_protocol.Response:
    return await request(address, bookie_protocol.FaultRequest(1, spec.encode()))
