"""The gateway's links over TLS (client/tls.py): the configuration keys, and each way a
handshake fails named clearly, with no fallback to plaintext.

The server side is a real TLS server on loopback (Python's ssl, the certificates of
georep/runtime/loopback_ca.py) that answers the Pulsar handshake with georep's own codec; the
whole broker over TLS is tested in tests/integration/test_tls.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import ssl
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from georep.client.admin import ClusterAdminClient
from georep.client.errors import AdminRequestFailed, ConnectFailed, LinkError
from georep.client.link import PulsarLink
from georep.client.tls import ClientTls
from georep.gateway.config import load
from georep.runtime.console import ConfigError
from georep.runtime.loopback_ca import LoopbackCa
from georep.wire import commands, frames
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import Type


@pytest.fixture(scope="module")
def ca(tmp_path_factory) -> LoopbackCa:
    return LoopbackCa.create(tmp_path_factory.mktemp("tls"))


class FakeBroker:
    """The Pulsar handshake and lookups, nothing more: CONNECTED to a CONNECT, and a
    lookup answered with ``lookup_tls`` as the broker's TLS URL. Records every byte it
    read, to show what a client sent."""

    def __init__(self, lookup_tls: str | None) -> None:
        self.lookup_tls = lookup_tls
        self.received = bytearray()
        self.lookups: list[pb.Lookup] = []
        self.port = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = frames.FrameDecoder()
        try:
            while data := await reader.read(65536):
                self.received += data
                decoder.feed(data)
                while (frame := decoder.next_frame()) is not None:
                    writer.write(frames.encode_command(self._answer(frame.command)))
        except (ConnectionError, ssl.SSLError, Exception):
            pass
        finally:
            writer.close()

    def _answer(self, command: pb.BaseCommand) -> pb.BaseCommand:
        if command.type == Type.CONNECT:
            return commands.connected("fake", pb.PROTOCOL_V20, 5 * 1024 * 1024)
        if command.type == Type.LOOKUP:
            self.lookups.append(command.lookup)
            return commands.lookup_response(
                command.lookup.request_id,
                f"pulsar://127.0.0.1:{self.port}",
                broker_service_url_tls=self.lookup_tls,
            )
        return commands.pong()


@contextlib.asynccontextmanager
async def broker(
    context: ssl.SSLContext | None, *, lookup_tls: bool = True
) -> AsyncIterator[FakeBroker]:
    fake = FakeBroker(None)
    server = await asyncio.start_server(fake.serve, "127.0.0.1", 0, ssl=context)
    fake.port = server.sockets[0].getsockname()[1]
    fake.lookup_tls = f"pulsar+ssl://127.0.0.1:{fake.port}" if lookup_tls else None
    try:
        yield fake
    finally:
        server.close()
        await server.wait_closed()


def link(fake: FakeBroker, client: ClientTls, host: str = "127.0.0.1") -> PulsarLink:
    return PulsarLink(
        f"pulsar+ssl://{host}:{fake.port}",
        ssl_context=client.context(),
        cluster="B",
        connect_timeout_s=10,
    )


async def test_a_tls_link_connects_and_follows_the_brokers_tls_url(ca) -> None:
    async with broker(ca.server_files("B").server_context()) as fake:
        pulsar = link(fake, ClientTls(trust_certs_file=ca.ca_file))
        try:
            connection = await pulsar.lookup("persistent://t/ns/x")
            assert connection.url == f"pulsar+ssl://127.0.0.1:{fake.port}"
            assert connection.server_version == "fake"
            assert pulsar.connect_error is None
        finally:
            await pulsar.close()


async def test_a_link_names_its_listener_on_every_lookup(ca) -> None:
    """``listener_name`` (a cluster reached through a proxy or NAT): the brokers answer
    with that advertised listener's address; without one, the field is not sent."""
    async with broker(ca.server_files("B").server_context()) as fake:
        for name in ("wan", None):
            pulsar = PulsarLink(
                f"pulsar+ssl://127.0.0.1:{fake.port}",
                ssl_context=ClientTls(trust_certs_file=ca.ca_file).context(),
                cluster="B",
                listener_name=name,
            )
            try:
                await pulsar.lookup("persistent://t/ns/x")
            finally:
                await pulsar.close()
            sent = fake.lookups[-1]
            assert sent.HasField("advertised_listener_name") == (name is not None)
            assert sent.advertised_listener_name == (name or "")


@pytest.mark.parametrize(
    ("case", "words"),
    [
        ("unknown CA", "certificate verify failed: unable to get local issuer certificate"),
        ("expired", "certificate verify failed: certificate has expired"),
        ("name mismatch", "certificate verify failed: IP address mismatch"),
    ],
)
async def test_a_server_certificate_that_fails_is_named(ca, tmp_path, case, words, caplog) -> None:
    trust = ca.ca_file
    host = "127.0.0.1"
    if case == "unknown CA":
        server = ca.server_files("B")
        trust = LoopbackCa.create(tmp_path / "other").ca_file
    elif case == "expired":
        yesterday = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=1)
        server = ca.server_files("B-expired", not_after=yesterday)
    else:
        server = ca.server_files("B-elsewhere", names=("broker-b.example",))
    async with broker(server.server_context()) as fake:
        pulsar = link(fake, ClientTls(trust_certs_file=trust), host)
        try:
            with caplog.at_level(logging.WARNING, "georep.client.link"):
                failures = []
                for _ in range(3):  # three tries, one line: a retry storm is no log storm
                    with pytest.raises(ConnectFailed) as failed:
                        await pulsar.connection()
                    failures.append(failed)
            failed = failures[-1]
            assert words in str(failed.value)
            assert failed.value.tls_failed and not failed.value.retriable
            assert pulsar.connect_error is not None and words in pulsar.connect_error
            lines = [r.getMessage() for r in caplog.records if r.name == "georep.client.link"]
            assert len(lines) == 1 and lines[0].startswith("cluster B: ") and words in lines[0]
            assert not fake.received  # not one byte of the Pulsar protocol was sent
        finally:
            await pulsar.close()


async def test_hostname_verification_may_be_switched_off(ca) -> None:
    server = ca.server_files("B-other-name", names=("broker-b.example",))
    async with broker(server.server_context()) as fake:
        pulsar = link(fake, ClientTls(trust_certs_file=ca.ca_file, hostname_verification=False))
        try:
            assert (await pulsar.connection()).is_ready
        finally:
            await pulsar.close()


async def test_a_client_certificate_the_broker_requires(ca) -> None:
    context = ca.server_files("B").server_context(client_ca_file=ca.ca_file)
    async with broker(context) as fake:
        without = link(fake, ClientTls(trust_certs_file=ca.ca_file))
        client = ca.client_files("gateway-a")
        with_cert = link(
            fake,
            ClientTls(
                trust_certs_file=ca.ca_file, cert_file=client.cert_file, key_file=client.key_file
            ),
        )
        try:
            with pytest.raises(LinkError) as refused:
                await without.connection()
            assert "TLS: the server " in str(refused.value)
            assert "client certificate" in str(refused.value)
            assert isinstance(refused.value, ConnectFailed) and refused.value.tls_failed
            assert (await with_cert.connection()).is_ready
        finally:
            await without.close()
            await with_cert.close()


async def test_a_plaintext_server_is_never_spoken_to_in_plaintext(ca) -> None:
    """A TLS URL pointing at a plaintext broker: the handshake fails, and the broker saw
    only the TLS ClientHello, never a CONNECT."""
    async with broker(None) as fake:
        pulsar = link(fake, ClientTls(trust_certs_file=ca.ca_file))
        try:
            with pytest.raises(ConnectFailed) as failed:
                await pulsar.connection()
            assert "does it serve TLS on this port" in str(failed.value)
            assert fake.received[:1] == b"\x16" and b"georep-gateway" not in fake.received
        finally:
            await pulsar.close()


async def test_a_lookup_naming_no_tls_url_is_refused_not_followed_in_plaintext(ca) -> None:
    async with broker(ca.server_files("B").server_context(), lookup_tls=False) as fake:
        pulsar = link(fake, ClientTls(trust_certs_file=ca.ca_file))
        try:
            with pytest.raises(ConnectFailed, match="no TLS URL"):
                await pulsar.lookup("persistent://t/ns/x")
        finally:
            await pulsar.close()


def test_a_tls_url_without_settings_is_refused() -> None:
    with pytest.raises(LinkError, match="TLS settings"):
        PulsarLink("pulsar+ssl://127.0.0.1:6651")
    with pytest.raises(AdminRequestFailed, match="TLS settings"):
        ClusterAdminClient("https://127.0.0.1:8443", cluster_name="B")


@contextlib.asynccontextmanager
async def https_admin(context: ssl.SSLContext) -> AsyncIterator[str]:
    async def clusters(request: web.Request) -> web.Response:
        return web.json_response(["B"])

    app = web.Application()
    app.router.add_get("/admin/v2/clusters", clusters)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_the_admin_client_speaks_https_and_names_a_refused_certificate(ca, tmp_path) -> None:
    async with https_admin(ca.server_files("B").server_context()) as url:
        good = ClusterAdminClient(
            url, cluster_name="B", ssl_context=ClientTls(trust_certs_file=ca.ca_file).context()
        )
        stranger = LoopbackCa.create(tmp_path / "other").ca_file
        bad = ClusterAdminClient(
            url, cluster_name="B", ssl_context=ClientTls(trust_certs_file=stranger).context()
        )
        try:
            assert await good.cluster_names() == ["B"]
            with pytest.raises(AdminRequestFailed) as failed:
                await bad.cluster_names()
            assert "B: GET /admin/v2/clusters: TLS: certificate verify failed" in str(failed.value)
            assert failed.value.tls_failed and not failed.value.retriable
            assert bad.connect_error is not None
            assert bad.connect_error.startswith("TLS: certificate verify failed")
            assert good.connect_error is None
        finally:
            await good.close()
            await bad.close()


# -- configuration -----------------------------------------------------------------------

CONFIG = """
[gateway]
listen = "127.0.0.1:0"
metadata = "sqlite:///gw.db"

[local]
name = "A"
service_url = "pulsar://127.0.0.1:6650"
admin_url = "http://127.0.0.1:8080"

[remotes.B]
service_url = "pulsar+ssl://127.0.0.1:6651"
admin_url = "https://127.0.0.1:8443"
{tls}
"""


def config_file(tmp_path: Path, tls: str, gateway: str = "") -> Path:
    text = CONFIG.replace("{tls}", textwrap.dedent(tls))
    if gateway:
        text = text.replace(
            'metadata = "sqlite:///gw.db"', f'metadata = "sqlite:///gw.db"\n{gateway}'
        )
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    return path


def test_the_tls_keys_of_a_cluster(ca, tmp_path) -> None:
    client = ca.client_files("gateway-a")
    config = load(
        config_file(
            tmp_path,
            f"""
            tls_trust_certs_file = "{ca.ca_file}"
            tls_cert_file = "{client.cert_file}"
            tls_key_file = "{client.key_file}"
            """,
        ),
        {},
    )
    remote = config.remotes["B"]
    assert remote.tls == ClientTls(ca.ca_file, True, client.cert_file, client.key_file, False)
    assert remote.ssl_context is not None and remote.ssl_context.check_hostname
    assert config.local.tls is None and config.local.ssl_context is None
    # the system's trust store when no CA file is named
    assert load(config_file(tmp_path, ""), {}).remotes["B"].ssl_context is not None


@pytest.mark.parametrize(
    ("tls", "words"),
    [
        ('tls_trust_certs_file = "missing.pem"', "tls_trust_certs_file"),
        ('tls_cert_file = "c.pem"', "tls_cert_file and tls_key_file go together"),
        ("tls_hostname_verification = 1", "must be true or false"),
        ('tls_trust_certs_file = "ca.pem"\ntls_verify = true', "tls_verify"),
    ],
)
def test_tls_mistakes_are_named(ca, tmp_path, tls, words) -> None:
    (tmp_path / "ca.pem").write_bytes(ca.ca_file.read_bytes())
    with pytest.raises(ConfigError, match=words):
        load(config_file(tmp_path, tls), {})


def test_tls_keys_beside_plaintext_urls_are_refused(ca, tmp_path) -> None:
    path = config_file(tmp_path, f'tls_trust_certs_file = "{ca.ca_file}"')
    path.write_text(
        path.read_text()
        .replace("pulsar+ssl://127.0.0.1:6651", "pulsar://127.0.0.1:6651")
        .replace("https://127.0.0.1:8443", "http://127.0.0.1:8443")
    )
    with pytest.raises(ConfigError, match="neither URL runs TLS"):
        load(path, {})


def test_insecure_and_half_plaintext_clusters_are_loud(ca, tmp_path, caplog) -> None:
    path = config_file(tmp_path, "tls_allow_insecure_connection = true")
    path.write_text(path.read_text().replace("https://127.0.0.1:8443", "http://127.0.0.1:8443"))
    with caplog.at_level(logging.WARNING, "georep.gateway.config"):
        config = load(path, {})
    context = config.remotes["B"].ssl_context
    assert context is not None and context.verify_mode is ssl.CERT_NONE
    text = caplog.text
    assert "tls_allow_insecure_connection = true" in text
    assert "admin_url is plaintext" in text


def test_the_gateways_rest_over_https(ca, tmp_path) -> None:
    server = ca.server_files("gateway-a")
    config = load(
        config_file(
            tmp_path,
            "",
            f'tls_cert_file = "{server.cert_file}"\ntls_key_file = "{server.key_file}"',
        ),
        {},
    )
    assert config.rest_tls == server
    with pytest.raises(ConfigError, match="go together"):
        load(config_file(tmp_path, "", f'tls_cert_file = "{server.cert_file}"'), {})
    with pytest.raises(ConfigError, match=r"\[gateway\] tls_cert_file"):
        load(
            config_file(
                tmp_path, "", f'tls_cert_file = "{ca.ca_file}"\ntls_key_file = "{server.key_file}"'
            ),
            {},
        )


def test_what_is_said_once_per_cluster_and_what_is_a_topic_moving() -> None:
    """The replicators and syncs leave these to one line elsewhere, or to none."""
    from georep.client.errors import LinkClosed, RequestTimeout, ServerError, moved
    from georep.client.errors import said_once_per_cluster as once
    from georep.wire import pulsar_wire_pb2 as wire

    assert once(ConnectFailed("x")) and once(AdminRequestFailed("x", unreachable=True))
    assert not once(AdminRequestFailed("x", 500)) and not once(LinkClosed("x"))
    assert moved(LinkClosed("the broker closed producer 'p'"))
    assert moved(ServerError("not ready", wire.SERVICE_NOT_READY))
    assert not moved(ServerError("refused", wire.AUTHORIZATION_ERROR))
    assert not moved(RequestTimeout("x")) and not moved(AdminRequestFailed("x", 500))
