"""A whole cluster whose disks fill up, with the official client: sends fail with an error
(never hang) while no ensemble can write, ``/health`` says which bookies are read-only,
the same running cluster takes writes again once space returns, and after kill -9 and a
restart every acknowledged message reads back.

Two ways to fill: the bookies' own disk writer refusing (fault injection in process: the
real journal and storage code meets ENOSPC), and a real tmpfs filled with a file (needs
root, as CI has)."""

from __future__ import annotations

import os
import subprocess
import time

import pulsar
import pytest

from georep.storage.bookie.disk_io import DiskFault
from tests.harness.broker_cluster import (
    ClusterProcess,
    InProcessCluster,
    open_client,
    unique_topic,
)
from tests.harness.gateway import admin_url, http

pytestmark = pytest.mark.timeout(300)

SEND_TIMEOUT_MS = 30_000
RESUME_DEADLINE_S = 60.0
EARLIEST = pulsar.MessageId.earliest


def _send_until_refused(producer: pulsar.Producer, payload_bytes: int, acked: list[bytes]):
    """Send until one send fails; return the error. Acknowledged payloads go to ``acked``."""
    for index in range(100_000):
        payload = (b"%d:" % index).ljust(payload_bytes, b"p")
        try:
            producer.send(payload)
        except pulsar.PulsarException as error:
            return error
        acked.append(payload)
    raise AssertionError("no send failed")


def _send_until_taken(producer: pulsar.Producer, payload: bytes) -> float:
    started = time.monotonic()
    while True:
        try:
            producer.send(payload)
            return time.monotonic() - started
        except pulsar.PulsarException:
            assert time.monotonic() - started < RESUME_DEADLINE_S, "writes never resumed"
            time.sleep(0.2)


def _wait_healthy(admin: str) -> None:
    """Until /health says every bookie takes writes again."""
    deadline = time.monotonic() + RESUME_DEADLINE_S
    while http("GET", admin + "/health")[0] != 200:
        assert time.monotonic() < deadline, "the cluster never became healthy"
        time.sleep(0.2)


def _check_acknowledged(read: list[bytes], acked: list[bytes]) -> None:
    """Every acknowledged message, once, in order. A send that failed may still have been
    stored (a write that reached some bookies is recovered when its ledger closes: an
    error means "maybe", as in BookKeeper), so the log may hold it too."""
    assert len(read) == len(set(read)), "a message stored twice"
    position = {payload: index for index, payload in enumerate(read)}
    missing = [payload[:20] for payload in acked if payload not in position]
    assert not missing, f"{len(missing)} acknowledged messages lost: {missing[:3]}"
    order = [position[payload] for payload in acked]
    assert order == sorted(order)


def _read_all(url: str, topic: str) -> list[bytes]:
    with open_client(url) as client:
        reader = client.create_reader(topic, EARLIEST)
        out = []
        while reader.has_message_available():
            out.append(reader.read_next(timeout_millis=10_000).data())
        reader.close()
    return out


def test_every_bookie_refusing_fails_sends_then_writes_resume(tmp_path) -> None:
    cluster = InProcessCluster(tmp_path / "cluster", admin_port=0).start()
    try:
        topic = unique_topic("full")
        acked: list[bytes] = []
        with open_client(cluster.url) as client:
            producer = client.create_producer(
                topic, batching_enabled=False, send_timeout_millis=SEND_TIMEOUT_MS
            )
            for index in range(20):
                producer.send(b"before-%d" % index)
                acked.append(b"before-%d" % index)

            def fill(running) -> None:
                for bookie in running.bookies:
                    bookie.disk.fault = DiskFault("enospc")

            cluster.call(fill)
            for _ in range(3):  # each fails (with an error, not a hang), every time
                with pytest.raises(pulsar.PulsarException):
                    producer.send(b"while-full")
            status, body = http("GET", cluster.admin_url + "/health")
            assert status == 503 and body["status"] == "read-only", body
            # Those that failed a write say why; placement then keeps new ledgers off
            # them, so a bookie may be left that was never asked to write.
            read_only = [b for b in body["bookies"] if b["read_only"]]
            assert read_only and all("No space" in b["reason"] for b in read_only), body

            def make_room(running) -> None:
                for bookie in running.bookies:
                    bookie.disk.fault = None

            cluster.call(make_room)
            seconds = _send_until_taken(producer, b"after-0")
            print(f"writes resumed {seconds:.2f} s after the disks had room")
            acked.append(b"after-0")
            for index in range(1, 20):
                producer.send(b"after-%d" % index)
                acked.append(b"after-%d" % index)
            _wait_healthy(cluster.admin_url)
        _check_acknowledged(_read_all(cluster.url, topic), acked)
    finally:
        cluster.stop()


@pytest.fixture
def small_disk(tmp_path):
    """A 48 MiB tmpfs (needs root, as CI has), unmounted however the test ends."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount_point)],
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


def test_a_real_full_disk_loses_nothing_acknowledged(small_disk) -> None:
    """The probe that once lost every acknowledged message: a cluster on a tmpfs, a filler
    file, 64 KiB messages until a send fails; the filler removed, writes resume in the
    running cluster; kill -9 and restart: every acknowledged message reads back."""
    cluster = ClusterProcess(small_disk, name="A")  # its log lands beside the mount
    cluster.start()
    try:
        stat = os.statvfs(small_disk)
        filler = small_disk / "filler"
        with open(filler, "wb") as file:
            size = stat.f_bavail * stat.f_frsize - (12 << 20)
            chunk = b"\0" * (1 << 20)
            while size > 0:
                size -= file.write(chunk[: min(size, len(chunk))])
        topic = unique_topic("tmpfs")
        acked: list[bytes] = []
        with open_client(cluster.url) as client:
            producer = client.create_producer(
                topic, batching_enabled=False, send_timeout_millis=SEND_TIMEOUT_MS
            )
            error = _send_until_refused(producer, 64 * 1024, acked)
            print(f"{len(acked)} acknowledged before the disk refused ({type(error).__name__})")
            assert acked
            status, body = http("GET", admin_url(cluster) + "/health")
            assert any(b["read_only"] for b in body.get("bookies", [])), (status, body)
            filler.unlink()
            seconds = _send_until_taken(producer, b"after")
            print(f"writes resumed {seconds:.2f} s after the filler was removed")
            acked.append(b"after")
        _wait_healthy(admin_url(cluster))
        _check_acknowledged(_read_all(cluster.url, topic), acked)
        cluster.kill()
        cluster.start()
        _check_acknowledged(_read_all(cluster.url, topic), acked)
    finally:
        cluster.kill()
