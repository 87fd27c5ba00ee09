"""Fuzz the bookie's frame handling over real sockets.

A live in-process bookie (its own event loop, in a thread) gets random frames and
mutations of valid ones. Each exchange must end with well-formed answers and/or a
closed connection; afterwards the bookie still answers, and the entries stored before
the fuzzing are unchanged. Hypothesis prints the failing input (and its seed).
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from georep import limits
from georep.storage import bookie_protocol
from georep.storage.bookie.bookie import Bookie, BookieConfig
from georep.storage.bookie_protocol import Status
from tests.harness.bookie import add_request, make_entry

STORED = {
    (ledger, entry): make_entry(ledger, entry, b"keep-%d-%d" % (ledger, entry))
    for ledger in (1, 2)
    for entry in range(5)
}
FUZZ_SETTINGS = settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


class LiveBookie:
    """A bookie serving from its own thread, so blocking sockets can talk to it."""

    def __init__(self, config: BookieConfig) -> None:
        self.config = config
        self.loop = asyncio.new_event_loop()
        self.bookie = Bookie(config)
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="fuzz-bookie", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.bookie.start())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.bookie.stop())
        self.loop.close()

    def start(self) -> LiveBookie:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.bookie.address.rsplit(":", 1)
        return host, int(port)


def exchange(
    address: tuple[str, int], data: bytes, chunk: int = 0
) -> list[bookie_protocol.Message]:
    """Send ``data`` (in ``chunk``-sized pieces if given), half-close, read until EOF.

    Every byte the bookie sends back must decode as response frames.
    """
    with socket.create_connection(address, timeout=10) as sock:
        try:
            if chunk:
                for start in range(0, len(data), chunk):
                    sock.sendall(data[start : start + chunk])
            else:
                sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the bookie already closed on a bad frame (EPIPE, ECONNRESET, ENOTCONN)
        received = []
        try:
            while block := sock.recv(65536):
                received.append(block)
        except ConnectionResetError:
            pass
    decoder = bookie_protocol.FrameDecoder(responses=True)
    answers = decoder.feed(b"".join(received))
    assert decoder.buffered_bytes == 0, "a partial response frame"
    return answers


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[LiveBookie]:
    directory = tmp_path_factory.mktemp("fuzz-bookie")
    bookie = LiveBookie(BookieConfig(data_dir=directory, fsync=False)).start()
    frames = b"".join(
        bookie_protocol.encode(bookie_protocol.AddRequest(n, ledger, entry, False, data))
        for n, ((ledger, entry), data) in enumerate(STORED.items(), 1)
    )
    answers = exchange(bookie.address, frames)
    assert [getattr(a, "status", None) for a in answers] == [Status.OK] * len(STORED)
    yield bookie
    bookie.stop()


def assert_alive_and_unchanged(live: LiveBookie) -> None:
    answers = exchange(live.address, bookie_protocol.encode(bookie_protocol.HealthRequest(1)))
    assert isinstance(answers[0], bookie_protocol.HealthResponse)
    assert answers[0].status == Status.OK
    json.loads(answers[0].stats_json)


def assert_stored_unchanged(live: LiveBookie) -> None:
    frames = b"".join(
        bookie_protocol.encode(bookie_protocol.ReadRequest(n, ledger, entry))
        for n, (ledger, entry) in enumerate(STORED, 1)
    )
    answers = exchange(live.address, frames)
    assert [(a.status, a.data) for a in answers] == [  # type: ignore[attr-defined]
        (Status.OK, data) for data in STORED.values()
    ]


# --- strategies --------------------------------------------------------------------


def valid_frames() -> st.SearchStrategy[bytes]:
    ledgers = st.sampled_from([1, 2, 3, 2**64 - 1])
    # Valid adds only to ledgers not in STORED: a valid add may legitimately overwrite.
    add_ledgers = st.sampled_from([3, 4, 2**64 - 1])
    entries = st.integers(-2, 6)
    requests = st.one_of(
        st.builds(
            lambda ledger, e, r: bookie_protocol.encode(
                add_request(ledger, e, b"fz", recovery=r, request_id=7)
            ),
            add_ledgers,
            st.integers(0, 6),
            st.booleans(),
        ),
        st.builds(
            lambda ledger, e, f: bookie_protocol.encode(
                bookie_protocol.ReadRequest(8, ledger, e, f)
            ),
            ledgers,
            entries,
            st.booleans(),
        ),
        st.builds(
            lambda ledger, f: bookie_protocol.encode(bookie_protocol.ReadLacRequest(9, ledger, f)),
            ledgers,
            st.booleans(),
        ),
        st.just(bookie_protocol.encode(bookie_protocol.HealthRequest(10))),
        st.builds(
            lambda b: bookie_protocol.encode(bookie_protocol.FaultRequest(11, b)),
            st.sampled_from([b"{}", b'{"drop_adds": true}', b"nope"]),
        ),
    )
    return requests


@st.composite
def mutated_frames(draw) -> bytes:
    frame = bytearray(draw(valid_frames()))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "truncate", "insert", "relength"]))
        if kind == "flip" and frame:
            at = draw(st.integers(0, len(frame) - 1))
            frame[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and frame:
            at = draw(st.integers(0, len(frame) - 1))
            frame[at] = draw(st.integers(0, 255))
        elif kind == "truncate":
            del frame[draw(st.integers(0, len(frame))) :]
        elif kind == "insert":
            at = draw(st.integers(0, len(frame)))
            frame[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "relength" and len(frame) >= 4:
            struct.pack_into(
                ">I",
                frame,
                0,
                draw(
                    st.sampled_from(
                        [
                            0,
                            1,
                            11,
                            12,
                            13,
                            len(frame) - 4,
                            len(frame),
                            2**31,
                            2**32 - 1,
                            limits.bookie_frame_bytes_max + 1,
                        ]
                    )
                ),
            )
    return bytes(frame)


@st.composite
def structured_frames(draw) -> bytes:
    body = draw(st.binary(max_size=64))
    header = struct.pack(
        ">BBBBQ",
        draw(st.sampled_from([1, 1, 1, 0, 2, 255])),
        draw(st.integers(0, 7)),
        draw(st.integers(0, 255)),
        draw(st.sampled_from([0, 0, 0, 1, 255])),
        draw(st.integers(0, 2**64 - 1)),
    )
    return struct.pack(">I", len(header) + len(body)) + header + body


streams = st.lists(
    st.one_of(valid_frames(), mutated_frames(), structured_frames(), st.binary(max_size=64)),
    min_size=1,
    max_size=6,
).map(b"".join)


# --- tests -------------------------------------------------------------------------


@FUZZ_SETTINGS
@given(data=streams, chunk=st.sampled_from([0, 0, 1, 3, 17]))
def test_fuzzed_frames_get_answers_or_a_close(live, data, chunk):
    exchange(live.address, data, chunk)
    assert_alive_and_unchanged(live)


@FUZZ_SETTINGS
@given(data=st.binary(min_size=1, max_size=512))
def test_random_bytes_never_hurt(live, data):
    exchange(live.address, data)
    assert_alive_and_unchanged(live)


def test_stored_data_unchanged_after_fuzzing(live):
    # Runs after the fuzz tests in this module (file order); also fine alone.
    assert_stored_unchanged(live)
    stats = live.bookie.stats()
    assert stats["journal"]["failed"] is None
