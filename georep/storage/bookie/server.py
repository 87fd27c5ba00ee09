"""The bookie's network face: an asyncio Protocol speaking :mod:`georep.storage.bookie_protocol`.

No task per request. ``data_received`` decodes every whole frame with
:class:`~georep.storage.bookie_protocol.FrameDecoder` and handles it at once: reads are
answered from storage in the same call; adds and fences are appended to the journal with
the connection as waiter, and answered from the journal's group callback. Replies are
collected per connection and written with one ``transport.write`` at the end of each
``data_received`` and after each journal group, so a group of 500 adds from one client
costs one ``send``.

Backpressure, three reasons a connection stops reading (``pause_reading``):

    IN_FLIGHT     this connection has ``connection_requests_in_flight_max`` unanswered
                  adds/fences; resumes at half
    WRITE_BUFFER  the peer does not read its replies (``pause_writing`` from the
                  transport past ``connection_write_buffer_bytes_max``)
    PRESSURE      the journal queue is at ``journal_queue_count_max`` or the write cache
                  is full; every connection pauses until a group or a checkpoint ends

Limits hold to within one read buffer of frames per connection (those already read).

Hardening: a bad frame (:class:`~georep.storage.errors.ProtocolError`) closes that
connection with a logged reason and touches nothing stored; an unexpected exception in
a handler answers ERROR and is logged; connections past ``bookie_connections_max`` are
closed at accept. A half-closed peer (EOF) still gets the answers to what it sent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from georep import limits
from georep.invariant import InvariantViolation
from georep.storage import bookie_protocol
from georep.storage.bookie.faults import NO_FAULTS, Faults, FaultSpecError
from georep.storage.bookie.journal import Journal
from georep.storage.bookie.ledger_dirs_monitor import Availability, DiskState, DiskThresholds
from georep.storage.bookie.ledger_storage import LedgerStorage
from georep.storage.bookie_protocol import Status
from georep.storage.entry import peek_ids, verify
from georep.storage.errors import CorruptEntry, ProtocolError

log = logging.getLogger(__name__)

IN_FLIGHT = 1
WRITE_BUFFER = 2
PRESSURE = 4

_encode = bookie_protocol.encode
_error_response = bookie_protocol.error_response


@dataclass(slots=True)
class ServerStats:
    connections: int = 0
    connections_refused: int = 0
    bad_frames: int = 0
    adds: int = 0
    adds_recovery: int = 0
    reads: int = 0
    read_lacs: int = 0
    fences: int = 0
    fenced_rejections: int = 0
    corrupt_in: int = 0
    corrupt_out: int = 0
    errors: int = 0
    faults_dropped: int = 0
    pauses_pressure: int = 0
    read_only_rejections: int = 0


class BookieConnection(asyncio.Protocol):
    """One client connection: decode, dispatch, collect replies, flush."""

    __slots__ = ("_decoder", "_eof", "_out", "_paused", "_server", "in_flight", "peer", "transport")

    def __init__(self, server: BookieServer) -> None:
        self._server = server
        self._decoder = bookie_protocol.FrameDecoder(responses=False)
        self._out: list[bytes] = []
        self._paused = 0
        self._eof = False
        self.in_flight = 0
        self.transport: asyncio.Transport | None = None
        self.peer = "?"

    # -- asyncio callbacks --

    def connection_made(self, base_transport: asyncio.BaseTransport) -> None:
        # A stream server's protocol is always handed a read-write transport.
        transport = typing.cast(asyncio.Transport, base_transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        server = self._server
        if len(server.connections) >= limits.bookie_connections_max or server.closing:
            server.stats.connections_refused += 1
            log.warning(
                "refusing connection from %s: %d connections open (max %d)",
                self.peer,
                len(server.connections),
                limits.bookie_connections_max,
            )
            transport.close()
            self.transport = None
            return
        transport.set_write_buffer_limits(high=limits.connection_write_buffer_bytes_max)
        server.connections.add(self)
        server.stats.connections += 1
        if server.pressure_paused:
            self.pause(PRESSURE)

    def data_received(self, data: bytes) -> None:
        if self.transport is None:
            return
        server = self._server
        try:
            messages = self._decoder.feed(data)
        except ProtocolError as exc:
            server.stats.bad_frames += 1
            log.warning("closing connection from %s: bad frame: %s", self.peer, exc)
            self.flush()
            self.transport.close()
            return
        handle = server.handle
        for message in messages:
            handle(self, message)
        self.flush()
        server.dirty.discard(self)
        if self.in_flight >= limits.connection_requests_in_flight_max:
            self.pause(IN_FLIGHT)
        server.check_pressure()

    def eof_received(self) -> bool:
        self._eof = True
        if self._decoder.buffered_bytes:
            log.info(
                "connection from %s closed mid-frame (%d bytes discarded)",
                self.peer,
                self._decoder.buffered_bytes,
            )
        # Keep the transport open for the answers still owed; close when none are.
        return self.in_flight > 0

    def connection_lost(self, exc: Exception | None) -> None:
        self._server.connections.discard(self)
        self._server.dirty.discard(self)
        self.transport = None

    def pause_writing(self) -> None:
        self.pause(WRITE_BUFFER)

    def resume_writing(self) -> None:
        self.resume(WRITE_BUFFER)

    # -- flow control --

    def pause(self, reason: int) -> None:
        if not self._paused and self.transport is not None:
            self.transport.pause_reading()
        self._paused |= reason

    def resume(self, reason: int) -> None:
        if not self._paused & reason:
            return
        self._paused &= ~reason
        if not self._paused and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    # -- replies --

    def reply(self, frame: bytes) -> None:
        delay_ms = self._server.faults.delay_ms
        if delay_ms:
            asyncio.get_running_loop().call_later(delay_ms / 1000.0, self._write_now, frame)
            return
        self._out.append(frame)
        self._server.dirty.add(self)

    def _write_now(self, frame: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(frame)

    def flush(self) -> None:
        out = self._out
        if not out:
            return
        self._out = []
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.write(out[0] if len(out) == 1 else b"".join(out))

    def request_done(self) -> None:
        """An add or fence left the journal: count it and close a half-closed peer."""
        self.in_flight -= 1
        if self._paused & IN_FLIGHT and (
            self.in_flight <= limits.connection_requests_in_flight_max // 2
        ):
            self.resume(IN_FLIGHT)
        if self._eof and self.in_flight == 0 and self.transport is not None:
            self.flush()
            self.transport.close()

    # -- journal waiters --

    def add_synced(self, request: bookie_protocol.AddRequest, error: BaseException | None) -> None:
        if error is None:
            self.reply(
                _encode(
                    bookie_protocol.AddResponse(
                        request.request_id, Status.OK, "", request.ledger_id, request.entry_id
                    )
                )
            )
        else:
            self.reply(_encode(_error_response(request, Status.ERROR, str(error))))
        self.request_done()

    def fence_synced(
        self,
        request: bookie_protocol.ReadRequest | bookie_protocol.ReadLacRequest,
        error: BaseException | None,
    ) -> None:
        if error is None:
            self.reply(self._server.answer_read(request))
        else:
            self.reply(_encode(_error_response(request, Status.ERROR, str(error))))
        self.request_done()


class BookieServer:
    """The listening socket, the open connections, and the request handlers."""

    def __init__(
        self,
        storage: LedgerStorage,
        journal: Journal,
        *,
        stats: Callable[[], dict[str, Any]],
        availability: Availability | None = None,
        fault_injection: bool = False,
        on_checkpoint_wanted: Callable[[], None] = lambda: None,
    ) -> None:
        self.storage = storage
        self.journal = journal
        self.availability = availability or Availability(DiskState(DiskThresholds()))
        self.fault_injection = fault_injection
        self.faults: Faults = NO_FAULTS
        self.stats = ServerStats()
        self.connections: set[BookieConnection] = set()
        self.dirty: set[BookieConnection] = set()
        self.pressure_paused = False
        self.closing = False
        self._stats = stats
        self._on_checkpoint_wanted = on_checkpoint_wanted
        self._server: asyncio.AbstractServer | None = None
        #: Request class -> its handler, which takes requests of that class (hence Any).
        self._handlers: dict[
            type[bookie_protocol.Message], Callable[[BookieConnection, Any], None]
        ] = {
            bookie_protocol.AddRequest: self._add,
            bookie_protocol.ReadRequest: self._read,
            bookie_protocol.ReadLacRequest: self._read,
            bookie_protocol.HealthRequest: self._health,
            bookie_protocol.FaultRequest: self._fault,
        }
        journal.group_done_hooks.append(self._group_done)

    async def start(self, host: str, port: int) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: BookieConnection(self), host, port, reuse_address=True, backlog=1024
        )
        sockname = self._server.sockets[0].getsockname()
        return sockname[0], sockname[1]

    def stop_listening(self) -> None:
        self.closing = True
        if self._server is not None:
            self._server.close()

    async def close(self) -> None:
        """Close every connection (after the journal answered what it holds)."""
        self.stop_listening()
        self.flush_dirty()
        for connection in list(self.connections):
            if connection.transport is not None:
                connection.transport.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    # -- dispatch --

    def handle(self, connection: BookieConnection, request: bookie_protocol.Message) -> None:
        try:
            self._handlers[type(request)](connection, request)
        except InvariantViolation:
            raise
        except Exception as exc:
            self.stats.errors += 1
            log.exception("error handling %s from %s", type(request).__name__, connection.peer)
            connection.reply(
                _encode(_error_response(request, Status.ERROR, f"{type(exc).__name__}: {exc}"))
            )

    def _add(self, connection: BookieConnection, request: bookie_protocol.AddRequest) -> None:
        faults = self.faults
        if faults is not NO_FAULTS:
            if faults.drops_add(request.entry_id, request.recovery):
                self.stats.faults_dropped += 1
                return
            if faults.fail_adds:
                connection.reply(
                    _encode(_error_response(request, Status.ERROR, "injected add failure"))
                )
                return
        if request.entry_id < 0:
            connection.reply(
                _encode(
                    _error_response(
                        request, Status.BAD_REQUEST, f"entry id {request.entry_id} is negative"
                    )
                )
            )
            return
        data = request.data
        ledger_id = request.ledger_id
        try:
            verify(data, ledger_id, request.entry_id)
        except CorruptEntry as exc:
            self.stats.corrupt_in += 1
            connection.reply(_encode(_error_response(request, Status.CORRUPT, str(exc))))
            return
        storage = self.storage
        state = storage.state(ledger_id)
        if state is not None and state.fenced and not request.recovery:
            self.stats.fenced_rejections += 1
            connection.reply(
                _encode(_error_response(request, Status.FENCED, f"ledger {ledger_id} is fenced"))
            )
            return
        journal = self.journal
        if journal.failed is not None:
            self.stats.read_only_rejections += 1
            connection.reply(_encode(_error_response(request, Status.ERROR, str(journal.failed))))
            return
        availability = self.availability
        reason = availability.reason()
        if reason is not None and not (request.recovery and availability.takes_recovery_adds):
            # Read-only: the client replaces this bookie in the ledger's ensemble.
            self.stats.read_only_rejections += 1
            connection.reply(
                _encode(_error_response(request, Status.ERROR, f"bookie is read-only: {reason}"))
            )
            return
        storage.add(ledger_id, request.entry_id, data, peek_ids(data)[2])
        self.stats.adds += 1
        if request.recovery:
            self.stats.adds_recovery += 1
        connection.in_flight += 1
        journal.append_entry(ledger_id, request.entry_id, data, connection.add_synced, request)
        if storage.checkpoint_wanted:
            self._on_checkpoint_wanted()

    def _read(
        self,
        connection: BookieConnection,
        request: bookie_protocol.ReadRequest | bookie_protocol.ReadLacRequest,
    ) -> None:
        faults = self.faults
        if faults is not NO_FAULTS:
            if faults.drop_reads:
                self.stats.faults_dropped += 1
                return
            if faults.fail_reads:
                connection.reply(
                    _encode(_error_response(request, Status.ERROR, "injected read failure"))
                )
                return
        if isinstance(request, bookie_protocol.ReadRequest) and request.entry_id < 0:
            connection.reply(
                _encode(
                    _error_response(
                        request, Status.BAD_REQUEST, f"entry id {request.entry_id} is negative"
                    )
                )
            )
            return
        if request.fence and not faults.ignore_fence:
            self.stats.fences += 1
            if self.journal.failed is not None:
                connection.reply(
                    _encode(_error_response(request, Status.ERROR, str(self.journal.failed)))
                )
                return
            # Refuse normal adds from now on; answer once the fence record is durable.
            self.storage.fence(request.ledger_id)
            connection.in_flight += 1
            self.journal.append_fence(request.ledger_id, connection.fence_synced, request)
            return
        connection.reply(self.answer_read(request))

    def answer_read(
        self, request: bookie_protocol.ReadRequest | bookie_protocol.ReadLacRequest
    ) -> bytes:
        storage = self.storage
        ledger_id = request.ledger_id
        state = storage.state(ledger_id)
        if state is None:
            return _encode(
                _error_response(
                    request, Status.NO_SUCH_LEDGER, f"no ledger {ledger_id} on this bookie"
                )
            )
        if isinstance(request, bookie_protocol.ReadLacRequest):
            self.stats.read_lacs += 1
            return _encode(
                bookie_protocol.ReadLacResponse(
                    request.request_id, Status.OK, "", state.lac, state.last_entry
                )
            )
        self.stats.reads += 1
        data = storage.read(ledger_id, request.entry_id)
        if data is None:
            return _encode(
                _error_response(
                    request,
                    Status.NO_SUCH_ENTRY,
                    f"no entry {request.entry_id} of ledger {ledger_id} on this bookie",
                )
            )
        try:
            verify(data, ledger_id, request.entry_id)
        except CorruptEntry as exc:
            self.stats.corrupt_out += 1
            log.error("stored entry %d/%d is corrupt: %s", ledger_id, request.entry_id, exc)
            return _encode(_error_response(request, Status.CORRUPT, f"stored entry: {exc}"))
        return _encode(bookie_protocol.ReadResponse(request.request_id, Status.OK, "", data))

    def _health(self, connection: BookieConnection, request: bookie_protocol.Request) -> None:
        body = json.dumps(self._stats(), sort_keys=True).encode()
        connection.reply(
            _encode(bookie_protocol.HealthResponse(request.request_id, Status.OK, "", body))
        )

    def _fault(self, connection: BookieConnection, request: bookie_protocol.FaultRequest) -> None:
        if not self.fault_injection:
            connection.reply(
                _encode(
                    _error_response(
                        request, Status.FAULT_DISABLED, "bookie started without --fault-injection"
                    )
                )
            )
            return
        try:
            faults = Faults.from_json(request.spec_json)
        except FaultSpecError as exc:
            connection.reply(_encode(_error_response(request, Status.BAD_REQUEST, str(exc))))
            return
        log.warning("fault injection: %s", faults.to_json() or "cleared")
        self.faults = faults if faults.any else NO_FAULTS
        self.storage.disk.fault = faults.disk_fault
        # The FAULT answer itself is never delayed, so a test can always clear a delay.
        connection._out.append(_encode(bookie_protocol.FaultResponse(request.request_id)))
        self.dirty.add(connection)

    # -- flushing and backpressure --

    def flush_dirty(self) -> None:
        dirty = self.dirty
        while dirty:
            dirty.pop().flush()

    def _group_done(self) -> None:
        self.flush_dirty()
        self.check_pressure()

    def check_pressure(self) -> None:
        under = self.journal.queue_full or self.storage.cache.full
        if under and not self.pressure_paused:
            self.pressure_paused = True
            self.stats.pauses_pressure += 1
            log.info(
                "pausing all connections: journal queue %d, write cache %d bytes",
                self.journal.queued_count,
                self.storage.cache.bytes,
            )
            for connection in self.connections:
                connection.pause(PRESSURE)
            if self.storage.cache.full:
                self._on_checkpoint_wanted()
        elif not under and self.pressure_paused:
            self.pressure_paused = False
            for connection in list(self.connections):
                connection.resume(PRESSURE)

    def snapshot(self) -> dict[str, Any]:
        return {
            "connections_open": len(self.connections),
            "faults": self.faults.to_json(),
            **{name: getattr(self.stats, name) for name in ServerStats.__slots__},
        }
