"""Full and failing disks with real bookie processes: faults injected at every write
site, and a real full tmpfs. After each: every acknowledged add reads back verified
(no checksum error), before and after kill -9, and writes resume by themselves."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from georep.storage import bookie_protocol
from georep.storage.bookie_protocol import Status
from georep.storage.client.placement import EnsemblePlacementPolicy
from georep.storage.entry import verify
from georep.storage.errors import NotEnoughBookies
from georep.storage.meta.store import MetadataStore
from tests.harness.bookie import (
    BookieProcess,
    RawClient,
    add_request,
    make_entry,
    request,
    running_bookie,
    set_faults,
)
from tests.harness.broker_cluster import free_port

LEDGER = 9
#: Generous: the bookie retries every 0.2 s here; a loaded CI machine may be slow.
RESUME_DEADLINE_S = 60.0
FAST = ("--checkpoint-interval-s", "0.2", "--disk-check-interval-s", "0.2")


async def _stats(address: str) -> dict:
    response = await request(address, bookie_protocol.HealthRequest(1))
    assert isinstance(response, bookie_protocol.HealthResponse)
    return json.loads(response.stats_json)


class Writer:
    """Adds to one ledger in order, remembering exactly what was acknowledged."""

    def __init__(self, client: RawClient, payload_bytes: int) -> None:
        self.client = client
        self.payload_bytes = payload_bytes
        self.acked: dict[int, bytes] = {}
        self.next_entry = 0
        self.refusals: list[str] = []

    async def add(self) -> bool:
        entry_id = self.next_entry
        payload = (b"%d:" % entry_id).ljust(self.payload_bytes, b"z")
        data = make_entry(LEDGER, entry_id, payload, lac=entry_id - 1)
        response = await self.client.request(
            bookie_protocol.AddRequest(self.client.next_id(), LEDGER, entry_id, False, data)
        )
        if response.status == Status.OK:
            self.acked[entry_id] = data
            self.next_entry += 1
            return True
        assert response.status == Status.ERROR, response
        self.refusals.append(response.error)
        return False

    async def add_until_refused(self, attempts: int) -> None:
        for _ in range(attempts):
            if not await self.add():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"no add refused in {attempts} attempts")

    async def add_until_taken(self) -> float:
        """Seconds until the bookie took an add again."""
        started = time.monotonic()
        while not await self.add():
            assert time.monotonic() - started < RESUME_DEADLINE_S, self.refusals[-1]
            await asyncio.sleep(0.1)
        return time.monotonic() - started


async def _check_all_readable(address: str, acked: dict[int, bytes]) -> None:
    async with RawClient(address) as client:
        for entry_id, data in acked.items():
            response = await client.request(
                bookie_protocol.ReadRequest(client.next_id(), LEDGER, entry_id)
            )
            assert response.status == Status.OK, (entry_id, response)
            assert isinstance(response, bookie_protocol.ReadResponse)
            verify(response.data, LEDGER, entry_id)
            assert response.data == data
    stats = await _stats(address)
    assert stats["server"]["corrupt_out"] == 0


@pytest.mark.parametrize(
    ("site", "kind"),
    [
        ("journal", "short"),
        ("journal", "eio"),
        ("entry_log", "short"),
        ("entry_log", "enospc"),
        ("index", "enospc"),
        ("mark", "eio"),
    ],
)
async def test_a_refused_write_at_any_site_loses_and_corrupts_nothing(tmp_path, site, kind):
    bookie = BookieProcess(tmp_path / "b", fault_injection=True, extra_args=FAST)
    bookie.start()
    try:
        async with RawClient(bookie.address) as client:
            writer = Writer(client, 4_000)
            for _ in range(20):
                assert await writer.add()
            spec = {"disk_write": kind, "disk_write_site": site}
            assert (await set_faults(bookie.address, json.dumps(spec))).status == Status.OK
            # Journal faults refuse the next add; checkpoint faults once a checkpoint ran.
            await writer.add_until_refused(attempts=2_000)
            stats = await _stats(bookie.address)
            assert stats["read_only"] and stats["read_only_reason"], stats
            assert (await set_faults(bookie.address)).status == Status.OK
            await writer.add_until_taken()
            for _ in range(10):
                assert await writer.add()
            assert (await _stats(bookie.address))["read_only"] is False
        await _check_all_readable(bookie.address, writer.acked)
        bookie.kill()
        bookie.start()
        await _check_all_readable(bookie.address, writer.acked)
    finally:
        bookie.kill()


# --- a real full disk ------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs (needs root, as CI has), unmounted however the test ends."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {result.stderr.strip()}")
    try:
        yield mount_point
    finally:
        if subprocess.run(["umount", str(mount_point)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def _fill(directory: Path, leave_bytes: int) -> Path:
    """A filler file taking all but ``leave_bytes`` of the file system."""
    stat = os.statvfs(directory)
    size = stat.f_bavail * stat.f_frsize - leave_bytes
    filler = directory / "filler"
    with open(filler, "wb") as file:
        chunk = b"\0" * (1 << 20)
        while size > 0:
            size -= file.write(chunk[: min(size, len(chunk))])
    return filler


@pytest.mark.parametrize(
    "thresholds",
    [
        pytest.param((), id="default-thresholds"),
        pytest.param(
            ("--disk-usage-read-only", "1.0", "--disk-usage-writable", "0.9"),
            id="thresholds-off-until-enospc",
        ),
    ],
)
async def test_full_disk_then_freed_with_and_without_restart(small_disk, thresholds):
    data_dir = small_disk / "b"
    bookie = BookieProcess(data_dir, extra_args=FAST + thresholds)
    bookie.start()
    try:
        # Room for a few dozen 64 KiB entries, then a full disk.
        filler = _fill(small_disk, leave_bytes=3 << 20)
        async with RawClient(bookie.address) as client:
            writer = Writer(client, 64 * 1024)
            await writer.add_until_refused(attempts=1_000)
            acked_while_filling = len(writer.acked)
            assert acked_while_filling > 0
            stats = await _stats(bookie.address)
            assert stats["read_only"], stats
            assert "read-only" in writer.refusals[-1] or "No space" in writer.refusals[-1]
            # Still full: refused again at once, the bookie keeps answering.
            assert not await writer.add()
            await _check_all_readable(bookie.address, writer.acked)

        # Restart while full: it starts, serves reads, refuses writes.
        bookie.kill()
        bookie.start()
        await _check_all_readable(bookie.address, writer.acked)

        filler.unlink()
        async with RawClient(bookie.address) as client:
            writer.client = client
            await writer.add_until_taken()
            for _ in range(5):
                assert await writer.add()
        await _check_all_readable(bookie.address, writer.acked)
        assert (await _stats(bookie.address))["read_only"] is False

        bookie.kill()
        bookie.start()
        await _check_all_readable(bookie.address, writer.acked)
    finally:
        with contextlib.suppress(Exception):
            bookie.kill()


async def test_over_the_threshold_normal_adds_are_refused_and_recovery_adds_taken(tmp_path):
    """Any real disk is above 0 % used: a read-only threshold of a ten-thousandth makes
    this bookie read-only by usage alone (no write ever failed)."""
    thresholds = {
        "disk_usage_warn_fraction": 0.0001,
        "disk_usage_read_only_fraction": 0.0001,
        "disk_usage_writable_fraction": 0.0001,
    }
    async with running_bookie(tmp_path / "b", **thresholds) as bookie:
        async with RawClient(bookie.address) as client:
            normal = await client.request(add_request(LEDGER, 0, request_id=client.next_id()))
            assert normal.status == Status.ERROR
            assert "read-only threshold" in normal.error
            recovery = await client.request(
                add_request(LEDGER, 0, recovery=True, request_id=client.next_id())
            )
            assert recovery.status == Status.OK
        stats = bookie.stats()
        assert stats["read_only"] and stats["disk"]["over_threshold"]
        assert "disk usage" in stats["read_only_reason"]


async def test_a_read_only_bookie_is_left_out_of_new_ensembles(tmp_path):
    """It says so in the metadata store (a lease), placement skips it, and it stays
    registered (the auditor must not take its ledgers for lost)."""
    store = await MetadataStore.open(f"sqlite:///{tmp_path}/meta.db")
    full = {
        "disk_usage_warn_fraction": 0.0001,
        "disk_usage_read_only_fraction": 0.0001,
        "disk_usage_writable_fraction": 0.0001,
    }
    options = {"metadata_store": store, "lease_s": 0.6, "disk_check_interval_s": 0.1}
    try:
        async with (
            running_bookie(tmp_path / "b0", **options) as b0,
            running_bookie(tmp_path / "b1", **options) as b1,
            running_bookie(tmp_path / "b2", **options, **full) as b2,
        ):
            async with asyncio.timeout(30):
                while await store.bookies.read_only_bookies() != {b2.address}:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            registered = {bookie.address for bookie in await store.bookies.list_bookies()}
            assert registered == {b0.address, b1.address, b2.address}
            placement = EnsemblePlacementPolicy(store.bookies)
            for _ in range(20):
                assert b2.address not in await placement.new_ensemble(2)
            with pytest.raises(NotEnoughBookies):
                await placement.new_ensemble(3)
            with pytest.raises(NotEnoughBookies):
                await placement.replace([b0.address, b1.address], [b0.address])
        assert await store.bookies.read_only_bookies() == set()  # given up on stop
    finally:
        await store.close()


async def test_a_bookie_restarted_after_kill_9_while_read_only_takes_adds_at_once(tmp_path):
    """Killed while read-only, a bookie leaves its read-only lease in the metadata store;
    restarted on the same address (writable now), it gives it up as it registers, or
    placement would leave it out until the lease ran out (the cluster refused its topics
    with NotEnoughBookies after a full disk was freed and the cluster killed -9)."""
    store = await MetadataStore.open(f"sqlite:///{tmp_path}/meta.db")
    port = free_port()
    await store.bookies.mark_bookie_read_only(f"127.0.0.1:{port}", 3600)  # the last life
    try:
        async with running_bookie(tmp_path / "b0", metadata_store=store, port=port) as b0:
            assert b0.address == f"127.0.0.1:{port}"
            assert await store.bookies.read_only_bookies() == set()
    finally:
        await store.close()
