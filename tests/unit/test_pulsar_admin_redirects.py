"""Pulsar's admin REST answers a change to a bundle or topic the broker does not own with
307 and the owner's address; :class:`PulsarAdmin` follows it with the same method, body
and token, a bounded number of times, and never from https to http."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from georep import limits
from pulsar_tools.admin import PulsarAdmin, PulsarAdminError


class Broker:
    """A broker that owns nothing (it redirects every call to ``owner``) or owns
    everything (it records the call and answers 204)."""

    def __init__(self, owner: Broker | None = None, location: str | None = None) -> None:
        self.calls: list[tuple[str, str, bytes, str | None]] = []
        broker = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                broker.calls.append(
                    (self.command, self.path, body, self.headers.get("Authorization"))
                )
                target = location or (owner and f"{owner.url}{self.path}")
                if target:
                    self.send_response(307)
                    self.send_header("Location", target)
                else:
                    self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_PUT = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def brokers() -> Iterator[list[Broker]]:
    made: list[Broker] = []
    yield made
    for broker in made:
        broker.close()


def test_a_put_to_a_broker_that_is_not_the_owner_reaches_the_owner(brokers):
    owner = Broker()
    other = Broker(owner=owner)
    brokers += [owner, other]
    PulsarAdmin(other.url, token="t0ken").request("PUT", "/admin/v2/x/unload", {"a": 1})
    assert [call[0] for call in other.calls] == ["PUT"]
    assert owner.calls == [
        ("PUT", "/admin/v2/x/unload", json.dumps({"a": 1}).encode(), "Bearer t0ken")
    ]


def test_a_redirect_loop_ends_in_an_error_after_the_limit(brokers):
    looping = Broker(location="/admin/v2/again")
    brokers.append(looping)
    with pytest.raises(PulsarAdminError, match="redirects") as raised:
        PulsarAdmin(looping.url).request("POST", "/admin/v2/x", {})
    assert raised.value.status == 307
    assert len(looping.calls) == limits.pulsar_admin_redirects_max + 1


def test_a_redirect_from_https_to_http_is_refused():
    from pulsar_tools.admin import _redirected

    with pytest.raises(PulsarAdminError, match="https"):
        _redirected("PUT", "/p", "https://a:8443/p", "http://b:8080/p")
    assert _redirected("PUT", "/p", "https://a:8443/p", "/q") == "https://a:8443/q"
