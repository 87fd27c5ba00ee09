"""TLS on the embedded cluster and through ``georep up``: the official pulsar-client
produces and consumes over ``pulsar+ssl://`` with the broker's name checked, lookups
name the TLS URL, the admin REST serves https with the same certificate, a client that
trusts another CA is refused with no plaintext fallback, a cluster that asks for client
certificates serves only clients that present one of its CA, and ``georep up --demo``
holds its checks with every link of the topology over TLS."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pulsar
import pytest

from georep.runtime.loopback_ca import LoopbackCa
from georep.up.supervisor import load_config
from georep.wire import commands, frames
from georep.wire import pulsar_wire_pb2 as pb
from georep.wire.commands import Type
from tests.harness.broker_cluster import (
    InProcessCluster,
    RawConnection,
    connect_frame,
    open_client,
    receive_all,
    unique_topic,
)
from tests.integration.test_gateway_up import Up

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def ca(tmp_path_factory) -> LoopbackCa:
    return LoopbackCa.create(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def cluster(ca, tmp_path_factory) -> Iterator[InProcessCluster]:
    running = InProcessCluster(
        tmp_path_factory.mktemp("cluster"), tls=ca.server_files("broker"), admin_port=0
    ).start()
    yield running
    running.stop()
    assert not running.errors


@pytest.fixture(scope="module")
def mutual(ca, tmp_path_factory) -> Iterator[InProcessCluster]:
    """A cluster that asks every client for a certificate of ``ca``."""
    running = InProcessCluster(
        tmp_path_factory.mktemp("mutual"),
        tls=ca.server_files("mutual-broker"),
        tls_client_ca_file=ca.ca_file,
        admin_port=0,
    ).start()
    yield running
    running.stop()
    assert not running.errors


#: How long a client that is refused tries before it says so.
REFUSED_TIMEOUT_S = 2


def tls_options(ca_file: Path) -> dict[str, object]:
    return {"tls_trust_certs_file_path": str(ca_file), "tls_validate_hostname": True}


def test_the_official_client_produces_and_consumes_over_tls(cluster, ca) -> None:
    assert cluster.url.startswith("pulsar+ssl://127.0.0.1:")
    topic = unique_topic("tls")
    with open_client(cluster.url, **tls_options(ca.ca_file)) as client:
        consumer = client.subscribe(topic, "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = client.create_producer(topic)
        for index in range(10):
            producer.send(f"m-{index}".encode())
        got = [message.data() for message in receive_all(consumer, 10)]
    assert got == [f"m-{index}".encode() for index in range(10)]


def test_a_lookup_over_tls_names_the_tls_url_alone(cluster, ca) -> None:
    raw = RawConnection(cluster.url.replace("pulsar+ssl://", "pulsar://"))
    context = ssl.create_default_context(cafile=ca.ca_file)
    raw.sock = context.wrap_socket(raw.sock, server_hostname="127.0.0.1")
    try:
        raw.send(connect_frame())
        lookup = commands.build(Type.LOOKUP, topic=unique_topic("lookup"), request_id=7)
        raw.send(frames.encode_command(lookup))
        replies, _ = raw.replies(wait_s=1)
    finally:
        raw.close()
    answers = [reply.lookup_response for reply in replies if reply.type == Type.LOOKUP_RESPONSE]
    assert len(answers) == 1, replies
    assert answers[0].response == pb.LookupResponse.CONNECT
    assert answers[0].broker_service_url_tls == cluster.url
    assert not answers[0].HasField("broker_service_url")  # no plaintext port to name


def test_a_client_trusting_another_ca_is_refused_and_plaintext_is_not_served(
    cluster, tmp_path
) -> None:
    other = LoopbackCa.create(tmp_path / "other")
    host, port = cluster.url.removeprefix("pulsar+ssl://").split(":")
    context = ssl.create_default_context(cafile=other.ca_file)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        with pytest.raises(ssl.SSLCertVerificationError):
            context.wrap_socket(sock, server_hostname=host)
    topic = unique_topic("refused")
    with open_client(
        cluster.url, operation_timeout_seconds=REFUSED_TIMEOUT_S, **tls_options(other.ca_file)
    ) as client:
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(topic)
    # The same port spoken to in plaintext: the handshake fails, nothing is served.
    with open_client(
        f"pulsar://{host}:{port}", operation_timeout_seconds=REFUSED_TIMEOUT_S
    ) as client:
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(topic)
    assert cluster.call(lambda running: str(topic) not in running.service.topics) is True


def test_the_admin_rest_serves_https_with_the_same_certificate(cluster, ca, tmp_path) -> None:
    assert cluster.admin_url.startswith("https://127.0.0.1:")
    context = ssl.create_default_context(cafile=ca.ca_file)
    with urllib.request.urlopen(
        f"{cluster.admin_url}/admin/v2/clusters", timeout=10, context=context
    ) as answer:
        assert answer.status == 200
        assert answer.read() == b'["test"]'
    other = ssl.create_default_context(cafile=LoopbackCa.create(tmp_path / "x").ca_file)
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(f"{cluster.admin_url}/admin/v2/clusters", timeout=10, context=other)
    plain = cluster.admin_url.replace("https://", "http://")
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(f"{plain}/admin/v2/clusters", timeout=10)


def test_with_client_certificates_asked_for_only_a_client_of_the_ca_is_served(
    mutual, ca, tmp_path
) -> None:
    app = ca.client_files("app")
    topic = unique_topic("mutual")
    with open_client(
        mutual.url,
        authentication=pulsar.AuthenticationTLS(str(app.cert_file), str(app.key_file)),
        **tls_options(ca.ca_file),
    ) as client:
        client.create_producer(topic).send(b"with a certificate")
    refused = {"operation_timeout_seconds": REFUSED_TIMEOUT_S, **tls_options(ca.ca_file)}
    with open_client(mutual.url, **refused) as client:
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(unique_topic("anonymous"))
    stranger = LoopbackCa.create(tmp_path / "stranger").client_files("app")
    with open_client(
        mutual.url,
        authentication=pulsar.AuthenticationTLS(str(stranger.cert_file), str(stranger.key_file)),
        **refused,
    ) as client:
        with pytest.raises(pulsar.PulsarException):
            client.create_producer(unique_topic("stranger"))

    url = f"{mutual.admin_url}/admin/v2/clusters"
    context = ssl.create_default_context(cafile=ca.ca_file)
    with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
        urllib.request.urlopen(url, timeout=10, context=context)
    context.load_cert_chain(app.cert_file, app.key_file)
    with urllib.request.urlopen(url, timeout=10, context=context) as answer:
        assert answer.status == 200


def test_a_cluster_given_unusable_tls_files_is_one_line_and_exit_2(ca, tmp_path) -> None:
    broker = ca.server_files("mismatch")
    other = ca.server_files("other")
    done = subprocess.run(
        [sys.executable, "-m", "georep", "cluster", "--name", "A", "--data", str(tmp_path),
         "--broker-port", "0", "--admin-port", "0",
         "--tls-cert-file", str(broker.cert_file), "--tls-key-file", str(other.key_file)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--tls-key-file" in lines[0], lines
    assert "PRIVATE KEY" not in done.stderr


def test_the_tls_example_is_the_three_cluster_example_over_tls() -> None:
    plain = load_config(EXAMPLES / "three-clusters.toml")
    tls = load_config(EXAMPLES / "three-clusters-tls.toml")
    assert tls.tls and not plain.tls
    assert tls.gateways.keys() == plain.gateways.keys()
    for name, gateway in tls.gateways.items():
        assert gateway.replicate == plain.gateways[name].replicate


def test_up_demo_holds_over_tls(tmp_path) -> None:
    up = Up(tmp_path, "--demo", toml="[tls]\nenabled = true\n")
    try:
        up.expect(r"^UP_READY 6 processes")
        ready = "\n".join(up.seen)
        assert "pulsar://" not in ready and "http://" not in ready, ready
        gateway_toml = (tmp_path / "data" / "gateway-A" / "gateway.toml").read_text()
        assert "pulsar://" not in gateway_toml and "http://" not in gateway_toml
        ca_file = tmp_path / "data" / "tls" / "ca.pem"
        assert f'tls_trust_certs_file = "{ca_file}"' in gateway_toml
        gateway_a = up.expect(r"gateway A\s+(https://\S+)")[1]
        context = ssl.create_default_context(cafile=ca_file)
        with urllib.request.urlopen(
            f"{gateway_a}/admin/georep/v1/openapi.json", timeout=10, context=context
        ) as answer:
            assert answer.status == 200
        up.expect(r"demo: cluster A holds from-A x5, from-B x5  \[ok\]")
        up.expect(r"demo: cluster B holds from-A x5, from-B x5  \[ok\]")
        up.expect(r"demo: cluster C holds from-A x5, from-C x5  \[ok\]")
        up.expect(r"every cluster holds what its policies say")
        up.expect(
            r"demo: failed over to C: demo-app received \['from-A-1', 'from-A-3', 'from-C-0'"
            r".*\[ok\]"
        )
        up.expect(r"demo: failed over to B: demo-app received \['from-A-1', 'from-A-3'\]  \[ok\]")
        assert up.process.wait(60) == 0
    finally:
        up.kill()
