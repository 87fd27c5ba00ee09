"""The admin REST served by AdminServer over real sockets: HTTPS with a throwaway
self-signed certificate (made with the openssl CLI; skipped without it), tokens checked
over the wire, and the metadata store shared with its owner."""

from __future__ import annotations

import shutil
import ssl
import subprocess

import aiohttp
import pytest

from georep.broker.admin import AdminServer, AdminSettings
from georep.broker.admin.state import StorageHealth
from georep.broker.meta.store import BrokerRepositories
from georep.rest.tokens import tokens
from georep.storage.bookie.ledger_dirs_monitor import BookieAvailability
from georep.storage.meta.store import MetadataStore
from tests.unit.test_admin_support import ADMIN_TOKEN, READ_TOKEN, MemoryCluster


@pytest.fixture
def certificate(tmp_path) -> tuple[str, str]:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl CLI to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return str(cert), str(key)


async def test_https_with_tokens(tmp_path, certificate: tuple[str, str]) -> None:
    cert, key = certificate
    url = f"sqlite:///{tmp_path}/meta.db"
    settings = AdminSettings("A", url, port=0, admin_tokens=tokens([ADMIN_TOKEN]),
                             read_only_tokens=tokens([READ_TOKEN]), tls_cert_file=cert,
                             tls_key_file=key)  # fmt: skip
    server = await AdminServer.start(settings, MemoryCluster())
    client_context = ssl.create_default_context(cafile=cert)
    base = f"https://127.0.0.1:{server.port}"
    try:
        async with aiohttp.ClientSession() as session:
            admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            reader = {"Authorization": f"Bearer {READ_TOKEN}"}
            async with session.put(
                f"{base}/admin/v2/tenants/acme", json={}, headers=admin, ssl=client_context
            ) as response:
                assert response.status == 204
            async with session.delete(
                f"{base}/admin/v2/tenants/acme", headers=reader, ssl=client_context
            ) as response:
                assert response.status == 403
            async with session.get(
                f"{base}/admin/v2/tenants", headers=reader, ssl=client_context
            ) as response:
                assert await response.json() == ["acme", "public"]
            with pytest.raises(aiohttp.ClientError):  # plain HTTP is not served
                async with session.get(f"http://127.0.0.1:{server.port}/health") as response:
                    await response.read()
    finally:
        await server.close()


async def test_shared_store_stays_open(tmp_path) -> None:
    url = f"sqlite:///{tmp_path}/meta.db"
    store = await MetadataStore.open(url)
    try:
        server = await AdminServer.start(AdminSettings("A", url, port=0), MemoryCluster(),
                                         store=store)  # fmt: skip
        async with aiohttp.ClientSession() as session:
            base = f"http://127.0.0.1:{server.port}"
            async with session.put(f"{base}/admin/v2/namespaces/public/ns") as response:
                assert response.status == 204
        await server.close()
        assert await BrokerRepositories(store.engine).catalog.list_namespaces("public") == [
            "default",
            "ns",
        ]  # still open
    finally:
        await store.close()


async def test_health_and_metrics_name_the_read_only_bookie(tmp_path) -> None:
    """Two of three bookies writable with an ensemble of 2: degraded (200); of 3: 503."""
    bookies = [
        BookieAvailability("127.0.0.1:1", False, None, None, 0.5),
        BookieAvailability("127.0.0.1:2", False, None, None, 0.5),
        BookieAvailability(
            "127.0.0.1:3", True, "checkpoint failed: [Errno 28] No space", "checkpoint", 0.99
        ),
    ]
    ensemble = {"size": 2}
    server = await AdminServer.start(
        AdminSettings("A", f"sqlite:///{tmp_path}/meta.db", port=0),
        MemoryCluster(),
        storage_health=lambda: StorageHealth(bookies, ensemble["size"]),
    )
    base = f"http://127.0.0.1:{server.port}"
    try:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/health") as response:
                body = await response.json()
                assert response.status == 200 and body["status"] == "degraded"
                assert body["bookies"][2]["read_only"] is True
                assert "No space" in body["bookies"][2]["reason"]
            ensemble["size"] = 3
            async with session.get(f"{base}/health") as response:
                assert response.status == 503
                assert (await response.json())["status"] == "read-only"
            async with session.get(f"{base}/metrics") as response:
                text = await response.text()
        assert 'georep_bookie_read_only{bookie="127.0.0.1:3",reason="checkpoint"} 1.0' in text
        assert 'georep_bookie_read_only{bookie="127.0.0.1:1",reason="none"} 0.0' in text
        assert 'georep_bookie_disk_used_ratio{bookie="127.0.0.1:3"} 0.99' in text
    finally:
        await server.close()
