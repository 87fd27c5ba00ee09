"""The bookie's request semantics, against an in-process bookie over real sockets."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from georep import limits
from georep.storage import bookie_protocol
from georep.storage.bookie import entry_log
from georep.storage.bookie_protocol import Status
from tests.harness.bookie import (
    RawClient,
    add_request,
    make_entry,
    request,
    running_bookie,
    set_faults,
)


async def _add(
    client: RawClient,
    ledger: int,
    entry: int,
    payload: bytes = b"p",
    *,
    lac: int = -1,
    recovery: bool = False,
) -> bookie_protocol.AddResponse:
    response = await client.request(
        add_request(ledger, entry, payload, lac=lac, recovery=recovery, request_id=client.next_id())
    )
    assert isinstance(response, bookie_protocol.AddResponse)  # a bookie answers in kind
    return response


async def _read(client: RawClient, ledger: int, entry: int, *, fence: bool = False):
    return await client.request(bookie_protocol.ReadRequest(client.next_id(), ledger, entry, fence))


async def _read_lac(client: RawClient, ledger: int, *, fence: bool = False):
    return await client.request(bookie_protocol.ReadLacRequest(client.next_id(), ledger, fence))


async def _health(address: str) -> dict:
    response = await request(address, bookie_protocol.HealthRequest(1))
    assert isinstance(response, bookie_protocol.HealthResponse)
    return json.loads(response.stats_json)


async def test_add_read_read_lac_round_trip(tmp_path):
    async with running_bookie(tmp_path / "b") as bookie, RawClient(bookie.address) as client:
        for entry_id in range(5):
            response = await _add(client, 7, entry_id, b"payload-%d" % entry_id, lac=entry_id - 1)
            assert response.status == Status.OK
            assert (response.ledger_id, response.entry_id) == (7, entry_id)
        for entry_id in range(5):
            response = await _read(client, 7, entry_id)
            assert response.status == Status.OK
            assert response.data == make_entry(
                7, entry_id, b"payload-%d" % entry_id, lac=entry_id - 1
            )
        response = await _read_lac(client, 7)
        assert (response.status, response.last_add_confirmed, response.last_entry_id) == (
            Status.OK,
            3,
            4,
        )


async def test_missing_ledger_and_entry(tmp_path):
    async with running_bookie(tmp_path / "b") as bookie, RawClient(bookie.address) as client:
        assert (await _read(client, 1, 0)).status == Status.NO_SUCH_LEDGER
        assert (await _read_lac(client, 1)).status == Status.NO_SUCH_LEDGER
        await _add(client, 1, 0)
        assert (await _read(client, 1, 1)).status == Status.NO_SUCH_ENTRY
        assert (await _read(client, 1, -1)).status == Status.BAD_REQUEST


async def test_max_lac_and_last_entry_tracked_out_of_order(tmp_path):
    async with running_bookie(tmp_path / "b") as bookie, RawClient(bookie.address) as client:
        await _add(client, 3, 5, lac=4)
        await _add(client, 3, 2, lac=1)
        response = await _read_lac(client, 3)
        assert (response.last_add_confirmed, response.last_entry_id) == (4, 5)


@pytest.mark.parametrize("fence_with", ["read", "read_lac"])
async def test_fence_refuses_normal_adds_but_not_recovery_adds(tmp_path, fence_with):
    async with running_bookie(tmp_path / "b") as bookie, RawClient(bookie.address) as client:
        for entry_id in range(3):
            await _add(client, 9, entry_id, lac=entry_id - 1)
        if fence_with == "read":
            response = await _read(client, 9, 2, fence=True)
            assert response.status == Status.OK
            assert response.data == make_entry(9, 2, b"p", lac=1)
        else:
            response = await _read_lac(client, 9, fence=True)
            assert (response.status, response.last_add_confirmed, response.last_entry_id) == (
                Status.OK,
                1,
                2,
            )
        assert (await _add(client, 9, 3)).status == Status.FENCED
        assert (await _read(client, 9, 3)).status == Status.NO_SUCH_ENTRY
        # Recovery re-adds an existing entry (idempotent overwrite) and a new one.
        assert (await _add(client, 9, 2, lac=1, recovery=True)).status == Status.OK
        assert (await _add(client, 9, 3, b"r", lac=2, recovery=True)).status == Status.OK
        assert (await _read(client, 9, 3)).data == make_entry(9, 3, b"r", lac=2)
        assert (await _read(client, 9, 2)).data == make_entry(9, 2, b"p", lac=1)


async def test_fence_on_unknown_ledger_refuses_later_adds(tmp_path):
    async with running_bookie(tmp_path / "b") as bookie, RawClient(bookie.address) as client:
        response = await _read_lac(client, 42, fence=True)
        assert (response.status, response.last_add_confirmed, response.last_entry_id) == (
            Status.OK,
            -1,
            -1,
        )
        assert (await _add(client, 42, 0)).status == Status.FENCED
        response = await _read(client, 43, 0, fence=True)
        assert response.status == Status.NO_SUCH_ENTRY  # known now (fenced), entry absent
        assert (await _add(client, 43, 0)).status == Status.FENCED


async def test_corrupt_adds_are_refused_and_not_stored(tmp_path):
    async with running_bookie(tmp_path / "b") as bookie, RawClient(bookie.address) as client:
        data = bytearray(make_entry(5, 0, b"payload"))
        data[-1] ^= 0x01  # payload no longer matches the CRC
        response = await client.request(
            bookie_protocol.AddRequest(client.next_id(), 5, 0, False, bytes(data))
        )
        assert response.status == Status.CORRUPT
        # Right CRC, wrong ids for the request.
        response = await client.request(
            bookie_protocol.AddRequest(client.next_id(), 5, 1, False, make_entry(5, 2))
        )
        assert response.status == Status.CORRUPT
        response = await client.request(
            bookie_protocol.AddRequest(client.next_id(), 5, 0, False, b"short")
        )
        assert response.status == Status.CORRUPT
        assert (await _read(client, 5, 0)).status == Status.NO_SUCH_LEDGER


async def test_pipelined_adds_on_many_connections(tmp_path):
    async with running_bookie(tmp_path / "b") as bookie:

        async def writer(ledger: int) -> None:
            async with RawClient(bookie.address) as client:
                for entry_id in range(200):
                    await client.send(
                        add_request(ledger, entry_id, b"x" * 100, request_id=entry_id + 1)
                    )
                answered = [await client.receive() for _ in range(200)]
                assert sorted(r.request_id for r in answered) == list(range(1, 201))
                assert {r.status for r in answered} == {Status.OK}

        await asyncio.gather(*(writer(ledger) for ledger in range(1, 6)))
        async with RawClient(bookie.address) as client:
            for ledger in range(1, 6):
                assert (await _read_lac(client, ledger)).last_entry_id == 199
        stats = bookie.stats()
        assert stats["journal"]["records"] == 1000
        assert stats["journal"]["fsyncs"] <= stats["journal"]["groups"]


async def test_backpressure_limits_pause_and_resume(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "connection_requests_in_flight_max", 4)
    async with running_bookie(tmp_path / "b") as bookie:
        assert bookie._journal is not None
        bookie._journal.queue_count_max = 8
        async with RawClient(bookie.address) as client:
            for entry_id in range(300):
                await client.send(add_request(1, entry_id, request_id=entry_id + 1))
            answered = [await client.receive() for _ in range(300)]
        assert [r.status for r in answered] == [Status.OK] * 300
        assert bookie.stats()["server"]["pauses_pressure"] >= 1


async def test_connection_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "bookie_connections_max", 2)
    async with running_bookie(tmp_path / "b") as bookie:
        async with RawClient(bookie.address) as first, RawClient(bookie.address) as second:
            assert (await _add(first, 1, 0)).status == Status.OK
            assert (await _add(second, 1, 1)).status == Status.OK
            async with RawClient(bookie.address) as third:
                with pytest.raises(ConnectionError):
                    await third.request(bookie_protocol.HealthRequest(1))
        assert bookie.stats()["server"]["connections_refused"] == 1
        assert (await _health(bookie.address))["server"]["connections_open"] == 1


@pytest.mark.parametrize(
    "bad",
    [
        b"\xff\xff\xff\xff",  # length past the maximum
        b"\x00\x00\x00\x02ab",  # length shorter than the header
        b"\x00\x00\x00\x0c\x09\x01\x00\x00" + bytes(8),  # wrong protocol version
        b"\x00\x00\x00\x0c\x01\x63\x00\x00" + bytes(8),  # unknown op code
        b"\x00\x00\x00\x0c\x01\x01\x00\x00" + bytes(8),  # ADD without a body
        b"\x00\x00\x00\x0c\x01\x04\x00\x05" + bytes(8),  # request carrying a status
    ],
)
async def test_bad_frame_closes_only_that_connection(tmp_path, bad):
    async with running_bookie(tmp_path / "b") as bookie, RawClient(bookie.address) as good:
        assert (await _add(good, 1, 0)).status == Status.OK
        async with RawClient(bookie.address) as evil:
            await evil.send_bytes(bad)
            with pytest.raises(ConnectionError):
                await evil.receive()
        assert (await _read(good, 1, 0)).status == Status.OK
        assert bookie.stats()["server"]["bad_frames"] == 1


async def test_half_closed_peer_still_gets_its_answers(tmp_path):
    async with running_bookie(tmp_path / "b") as bookie:
        host, port = bookie.address.rsplit(":", 1)
        frames = b"".join(
            bookie_protocol.encode(add_request(1, i, request_id=i + 1)) for i in range(50)
        )

        def exchange() -> bytes:
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                sock.sendall(frames)
                sock.shutdown(socket.SHUT_WR)
                chunks = []
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
                return b"".join(chunks)

        answers = bookie_protocol.FrameDecoder(responses=True).feed(
            await asyncio.to_thread(exchange)
        )
        assert [a.request_id for a in answers] == list(range(1, 51))
        responses = [a for a in answers if isinstance(a, bookie_protocol.Response)]
        assert len(responses) == len(answers) and {a.status for a in responses} == {Status.OK}


async def test_health_reports_stats(tmp_path):
    async with running_bookie(tmp_path / "b") as bookie:
        async with RawClient(bookie.address) as client:
            await _add(client, 1, 0)
        stats = await _health(bookie.address)
        assert stats["address"] == bookie.address
        assert stats["server"]["adds"] == 1
        assert stats["journal"]["records"] == 1


# --- fault injection -------------------------------------------------------------------


async def test_fault_requests_refused_without_fault_injection(tmp_path):
    async with running_bookie(tmp_path / "b") as bookie:
        response = await set_faults(bookie.address, '{"fail_adds": true}')
        assert response.status == Status.FAULT_DISABLED


@pytest.mark.parametrize(
    "spec",
    [
        "not json",
        "[]",
        '{"nope": 1}',
        '{"drop_adds": 1}',
        '{"delay_ms": -5}',
        '{"drop_adds_from_entry": -1}',
    ],
)
async def test_bad_fault_spec(tmp_path, spec):
    async with running_bookie(tmp_path / "b", fault_injection=True) as bookie:
        assert (await set_faults(bookie.address, spec)).status == Status.BAD_REQUEST


async def _assert_unanswered_then_clear(client: RawClient, address: str, dropped_id: int) -> None:
    """Clear faults, then prove the next answer is to a fresh request, not the dropped one."""
    assert (await set_faults(address, "{}")).status == Status.OK
    probe = bookie_protocol.HealthRequest(client.next_id())
    await client.send(probe)
    response = await client.receive()
    assert response.request_id == probe.request_id != dropped_id


async def test_fault_drop_and_fail_adds(tmp_path):
    async with (
        running_bookie(tmp_path / "b", fault_injection=True) as bookie,
        RawClient(bookie.address) as client,
    ):
        address = bookie.address
        await _add(client, 1, 0)
        assert (await set_faults(address, '{"fail_adds": true}')).status == Status.OK
        assert (await _add(client, 1, 1)).status == Status.ERROR
        await set_faults(address, '{"drop_adds": true}')
        dropped = add_request(1, 1, request_id=client.next_id())
        await client.send(dropped)
        await _assert_unanswered_then_clear(client, address, dropped.request_id)
        assert (await _read(client, 1, 1)).status == Status.NO_SUCH_ENTRY
        await set_faults(address, '{"drop_adds_from_entry": 3}')
        assert (await _add(client, 1, 2)).status == Status.OK
        dropped = add_request(1, 3, request_id=client.next_id())
        await client.send(dropped)
        await _assert_unanswered_then_clear(client, address, dropped.request_id)
        assert (await _add(client, 1, 3)).status == Status.OK
        assert bookie.stats()["server"]["faults_dropped"] == 2


async def test_fault_reads(tmp_path):
    async with (
        running_bookie(tmp_path / "b", fault_injection=True) as bookie,
        RawClient(bookie.address) as client,
    ):
        address = bookie.address
        await _add(client, 1, 0)
        await set_faults(address, '{"fail_reads": true}')
        assert (await _read(client, 1, 0)).status == Status.ERROR
        assert (await _read_lac(client, 1, fence=True)).status == Status.ERROR
        await set_faults(address, '{"drop_reads": true}')
        dropped = bookie_protocol.ReadRequest(client.next_id(), 1, 0)
        await client.send(dropped)
        await _assert_unanswered_then_clear(client, address, dropped.request_id)
        # Neither fault set a fence.
        assert (await _add(client, 1, 1)).status == Status.OK


async def test_fault_ignore_fence_loses_the_fence(tmp_path):
    async with (
        running_bookie(tmp_path / "b", fault_injection=True) as bookie,
        RawClient(bookie.address) as client,
    ):
        await _add(client, 1, 0)
        await set_faults(bookie.address, '{"ignore_fence": true}')
        response = await _read_lac(client, 1, fence=True)
        assert (response.status, response.last_entry_id) == (Status.OK, 0)
        assert (await _add(client, 1, 1)).status == Status.OK  # the fence was "lost"
        await set_faults(bookie.address, "{}")
        await _read_lac(client, 1, fence=True)
        assert (await _add(client, 1, 2)).status == Status.FENCED


async def test_fault_delay_still_answers(tmp_path):
    async with (
        running_bookie(tmp_path / "b", fault_injection=True) as bookie,
        RawClient(bookie.address) as client,
    ):
        await set_faults(bookie.address, '{"delay_ms": 20}')
        assert (await _add(client, 1, 0)).status == Status.OK
        assert (await _read(client, 1, 0)).status == Status.OK
        stats = await _health(bookie.address)
        assert stats["server"]["faults"] == {"delay_ms": 20}


# --- checkpoints and the entry log -----------------------------------------------------


async def test_checkpoint_then_restart_reads_from_entry_log(tmp_path):
    directory = tmp_path / "b"
    entries = {
        (ledger, e): make_entry(ledger, e, b"v%d-%d" % (ledger, e), lac=e - 1)
        for ledger in (1, 2)
        for e in range(20)
    }
    async with running_bookie(directory) as bookie, RawClient(bookie.address) as client:
        for (ledger, entry_id), data in entries.items():
            response = await client.request(
                bookie_protocol.AddRequest(client.next_id(), ledger, entry_id, False, data)
            )
            assert response.status == Status.OK
        await _read_lac(client, 2, fence=True)
        await bookie.checkpoint()
        assert bookie.stats()["storage"]["write_cache_entries"] == 0
        assert len(list((directory / "journal").glob("*.jnl"))) == 1
    async with running_bookie(directory) as bookie, RawClient(bookie.address) as client:
        assert bookie.stats()["replayed_records"] == 0
        for (ledger, entry_id), data in entries.items():
            assert (await _read(client, ledger, entry_id)).data == data
        assert bookie.stats()["storage"]["reads_from_log"] == len(entries)
        assert (await _read_lac(client, 1)).last_entry_id == 19
        assert (await _add(client, 2, 20)).status == Status.FENCED
        assert (await _add(client, 1, 20)).status == Status.OK


async def test_corruption_on_disk_is_reported_not_returned(tmp_path):
    directory = tmp_path / "b"
    async with running_bookie(directory) as bookie, RawClient(bookie.address) as client:
        for entry_id in range(3):
            await _add(client, 1, entry_id, b"precious-%d" % entry_id)
        await bookie.checkpoint()
    (log_path,) = [p for p in (directory / "entrylog").glob("*.log") if p.stat().st_size > 8]
    content = bytearray(log_path.read_bytes())
    at = content.find(b"precious-1")
    content[at] ^= 0x20
    log_path.write_bytes(bytes(content))
    async with running_bookie(directory) as bookie, RawClient(bookie.address) as client:
        response = await _read(client, 1, 1)
        assert response.status == Status.CORRUPT
        assert b"precious" not in response.error.encode()
        assert (await _read(client, 1, 0)).status == Status.OK
        assert (await _read(client, 1, 2)).status == Status.OK
        assert bookie.stats()["server"]["corrupt_out"] == 1


async def test_entry_log_rolls(tmp_path, monkeypatch):
    directory = tmp_path / "b"
    async with running_bookie(directory) as bookie, RawClient(bookie.address) as client:
        bookie.storage.entry_log.file_bytes_max = 4096
        for entry_id in range(10):
            await _add(client, 1, entry_id, b"z" * 1000)
        await bookie.checkpoint()
        assert len(bookie.storage.entry_log.log_ids()) >= 3
        for entry_id in range(10):
            assert (await _read(client, 1, entry_id)).status == Status.OK
    assert entry_log.list_log_ids(directory / "entrylog")


async def test_second_bookie_on_same_directory_refused(tmp_path):
    from georep.storage.bookie.bookie import DataDirectoryInUse

    async with running_bookie(tmp_path / "b"):
        with pytest.raises(DataDirectoryInUse):
            async with running_bookie(tmp_path / "b"):
                pass
