"""Crash safety with real bookie processes: kill -9, damaged journals, restarts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from georep.storage import bookie_protocol
from georep.storage.bookie import journal as journal_module
from georep.storage.bookie_protocol import Status
from tests.harness.bookie import BookieProcess, RawClient, add_request, make_entry, request


async def _stats(address: str) -> dict:
    response = await request(address, bookie_protocol.HealthRequest(1))
    assert isinstance(response, bookie_protocol.HealthResponse)
    return json.loads(response.stats_json)


async def _read(client: RawClient, ledger: int, entry: int) -> bookie_protocol.ReadResponse:
    response = await client.request(bookie_protocol.ReadRequest(client.next_id(), ledger, entry))
    assert isinstance(response, bookie_protocol.ReadResponse)  # a bookie answers in kind
    return response


async def _add(client: RawClient, ledger: int, entry: int, payload: bytes = b"p"):
    return await client.request(add_request(ledger, entry, payload, request_id=client.next_id()))


def _journal_files(directory: Path) -> list[Path]:
    return sorted((directory / "journal").glob("*.jnl"))


async def test_every_acknowledged_add_survives_kill_9(tmp_path):
    """Stream adds, kill -9 while many are in flight; every acked add is readable after."""
    bookie = BookieProcess(tmp_path / "b")
    bookie.start()
    acked: dict[tuple[int, int], bytes] = {}
    sent: dict[int, tuple[int, int, bytes]] = {}
    fence = bookie_protocol.ReadLacRequest(1_000_000, 3, fence=True)
    fenced = False
    try:
        async with RawClient(bookie.address) as client:

            async def stream() -> None:
                for n in range(50_000):
                    ledger, entry_id = 1 + n % 3, n // 3
                    data = make_entry(ledger, entry_id, b"durable-%d" % n, lac=entry_id - 1)
                    sent[n + 1] = (ledger, entry_id, data)
                    await client.send(
                        bookie_protocol.AddRequest(n + 1, ledger, entry_id, False, data)
                    )
                    if n == 300:  # fenced while adds keep flowing (ledger 3 refuses later)
                        await client.send(fence)

            sender = asyncio.create_task(stream())
            try:
                while True:
                    response = await client.receive()
                    if response.request_id == fence.request_id:
                        fenced = response.status == Status.OK
                        continue
                    if response.status == Status.OK:
                        ledger, entry_id, data = sent[response.request_id]
                        acked[(ledger, entry_id)] = data
                    if len(acked) == 2000:
                        bookie.kill()
            except (ConnectionError, TimeoutError):
                pass
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)
        assert len(sent) > len(acked), "the kill came after every add was answered"
        bookie.start()
        async with RawClient(bookie.address) as client:
            for (ledger, entry_id), data in acked.items():
                response = await _read(client, ledger, entry_id)
                assert response.status == Status.OK, (ledger, entry_id, response)
                assert response.data == data
            assert fenced
            assert (await _add(client, 3, 99_999)).status == Status.FENCED
        stats = await _stats(bookie.address)
        assert stats["replayed_records"] >= len(acked)
    finally:
        bookie.kill()


async def test_restart_after_fence_before_checkpoint_keeps_the_fence(tmp_path):
    bookie = BookieProcess(tmp_path / "b", extra_args=("--checkpoint-interval-s", "3600"))
    bookie.start()
    try:
        async with RawClient(bookie.address) as client:
            assert (await _add(client, 5, 0)).status == Status.OK
            response = await client.request(
                bookie_protocol.ReadLacRequest(client.next_id(), 5, True)
            )
            assert response.status == Status.OK
            response = await client.request(
                bookie_protocol.ReadRequest(client.next_id(), 6, 0, True)
            )
            assert response.status == Status.NO_SUCH_ENTRY  # fenced, so known, but empty
        assert (await _stats(bookie.address))["storage"]["checkpoints"] == 1  # start-up only
        bookie.kill()
        bookie.start()
        async with RawClient(bookie.address) as client:
            assert (await _add(client, 5, 1)).status == Status.FENCED
            assert (await _add(client, 6, 0)).status == Status.FENCED
            assert (await _read(client, 5, 0)).status == Status.OK
        # And once more after the restart's checkpoint moved it into the index.
        bookie.kill()
        bookie.start()
        async with RawClient(bookie.address) as client:
            assert (await _add(client, 5, 1)).status == Status.FENCED
            assert (await _add(client, 6, 0)).status == Status.FENCED
    finally:
        bookie.kill()


def _damage(path: Path, how: str) -> None:
    buffer = path.read_bytes()
    ends = [
        end for _, end in journal_module.parse_records(buffer, journal_module.FILE_HEADER_BYTES)
    ]
    if how == "truncated_mid_record":
        path.write_bytes(buffer[: ends[-2] + 20])
    elif how == "junk_tail":
        path.write_bytes(buffer + b"\x00\x00\x01\x00\xde\xad\xbe\xef" + b"junk" * 50)
    elif how == "bad_crc_tail":
        damaged = bytearray(buffer)
        damaged[ends[-2] + 30] ^= 0xFF
        path.write_bytes(bytes(damaged))


@pytest.mark.parametrize("how", ["truncated_mid_record", "junk_tail", "bad_crc_tail"])
async def test_damaged_journal_tail_replays_to_last_whole_record(tmp_path, how):
    directory = tmp_path / "b"
    bookie = BookieProcess(directory, extra_args=("--checkpoint-interval-s", "3600"))
    bookie.start()
    try:
        async with RawClient(bookie.address) as client:
            for entry_id in range(10):
                assert (await _add(client, 1, entry_id, b"e%d" % entry_id)).status == Status.OK
        bookie.kill()
        _damage(_journal_files(directory)[-1], how)
        bookie.start()
        survivors = 10 if how == "junk_tail" else 9
        async with RawClient(bookie.address) as client:
            for entry_id in range(survivors):
                response = await _read(client, 1, entry_id)
                assert response.data == make_entry(1, entry_id, b"e%d" % entry_id)
            if survivors == 9:
                assert (await _read(client, 1, 9)).status == Status.NO_SUCH_ENTRY
            # New adds go to a fresh journal file, never after the junk.
            for entry_id in range(10, 15):
                assert (await _add(client, 1, entry_id)).status == Status.OK
        assert (await _stats(bookie.address))["journal_torn_tails"] >= 1
        bookie.kill()
        bookie.start()
        async with RawClient(bookie.address) as client:
            for entry_id in [*range(survivors), *range(10, 15)]:
                assert (await _read(client, 1, entry_id)).status == Status.OK
    finally:
        bookie.kill()


@pytest.mark.parametrize("content", [b"", journal_module.fresh_file_header()])
async def test_empty_or_header_only_journal_file_starts(tmp_path, content):
    directory = tmp_path / "b"
    bookie = BookieProcess(directory, extra_args=("--checkpoint-interval-s", "3600"))
    bookie.start()
    try:
        async with RawClient(bookie.address) as client:
            assert (await _add(client, 1, 0)).status == Status.OK
        bookie.kill()
        last = _journal_files(directory)[-1]
        (last.parent / journal_module.file_name(int(last.stem) + 1)).write_bytes(content)
        bookie.start()
        async with RawClient(bookie.address) as client:
            assert (await _read(client, 1, 0)).status == Status.OK
            assert (await _add(client, 1, 1)).status == Status.OK
    finally:
        bookie.kill()


async def test_kill_9_with_entries_split_between_entry_log_and_journal(tmp_path):
    directory = tmp_path / "b"
    bookie = BookieProcess(directory, extra_args=("--checkpoint-interval-s", "0.2"))
    bookie.start()
    try:
        async with RawClient(bookie.address) as client:
            for entry_id in range(50):
                await _add(client, 2, entry_id, b"before")
            while (await _stats(bookie.address))["storage"]["checkpoint_entries"] < 50:  # noqa: ASYNC110 - polling another process
                await asyncio.sleep(0.05)
            for entry_id in range(50, 80):
                await _add(client, 2, entry_id, b"after")
        bookie.kill()
        bookie.start()
        async with RawClient(bookie.address) as client:
            for entry_id in range(80):
                payload = b"before" if entry_id < 50 else b"after"
                assert (await _read(client, 2, entry_id)).data == make_entry(2, entry_id, payload)
        assert bookie.stop() == 0
    finally:
        bookie.kill()
