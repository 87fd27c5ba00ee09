"""The shared REST toolkit's checks of where a request comes from (rest/access.py) and
how it is answered (rest/middleware.py), on a small app of its own: a browser page must
not be able to change anything, by cross-site request or by DNS rebinding, and nothing a
request carries can forge a log line."""

from __future__ import annotations

import logging

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from georep.rest.access import (
    ANY_HOST,
    LOOPBACK_NAMES,
    Access,
    ExposureError,
    allowed_hosts,
    check_exposure,
    printable,
)
from georep.rest.auth import Role
from georep.rest.json_io import NO_BODY, json_response, read_json
from georep.rest.middleware import answering, application, register
from georep.rest.routes import Route
from georep.rest.tokens import Token, TokenError, client_token

TOKEN = "admin-token-0123456789"
CHANGES: list[object] = []


async def show(request: web.Request) -> web.Response:
    return json_response({"name": request.match_info["name"]})


async def change(request: web.Request) -> web.Response:
    body = await read_json(request, required=False)
    CHANGES.append(None if body is NO_BODY else body)
    return web.Response(status=204)


ROUTES = (
    Route("GET", "/things/{name}", show, Role.READ, "Show"),
    Route("POST", "/things/{name}", change, Role.ADMIN, "Change", request="Thing",
          request_required=False),
    Route("DELETE", "/things/{name}", change, Role.ADMIN, "Delete"),
)  # fmt: skip

log = logging.getLogger("georep.test.rest")


async def client_for(access: Access) -> TestClient:
    app = application(answering(log), 1_000)
    register(app, ROUTES, access)
    client = TestClient(TestServer(app, host="127.0.0.1"))
    await client.start_server()
    return client


@pytest.fixture
async def open_rest():
    CHANGES.clear()
    client = await client_for(Access())
    yield client
    await client.close()


@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Type": "application/x-www-form-urlencoded"},
        {"Content-Type": "text/plain"},
        {"Content-Type": "multipart/form-data; boundary=x"},
        {},
    ],
)
async def test_a_post_a_browser_could_send_cross_site_changes_nothing(open_rest, headers):
    answer = await open_rest.post("/things/x", headers=headers)
    assert answer.status == 415
    assert "application/json" in (await answer.json())["reason"]
    assert CHANGES == []


async def test_a_json_post_without_a_body_passes(open_rest):
    answer = await open_rest.post("/things/x", headers={"Content-Type": "application/json"})
    assert answer.status == 204 and CHANGES == [None]


@pytest.mark.parametrize(
    "headers",
    [
        {"Host": "attacker.example"},  # DNS rebinding: the page's own name, our address
        {"Host": "attacker.example:80"},
        {"Host": "127.0.0.1.attacker.example"},
        {"Origin": "http://attacker.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},  # another port of localhost is another origin
    ],
)
async def test_foreign_hosts_and_origins_are_refused_on_every_route(open_rest, headers):
    port = open_rest.server.port
    sent = {"Content-Type": "application/json", **headers}
    if "Origin" in headers and headers["Origin"].startswith("http://attacker"):
        sent["Host"] = f"127.0.0.1:{port}"
    for method in ("GET", "POST", "DELETE"):
        answer = await open_rest.request(method, "/things/x", headers=sent)
        assert answer.status == 403, method
        assert "reason" in await answer.json()
    assert CHANGES == []


async def test_same_origin_and_loopback_names_pass(open_rest):
    port = open_rest.server.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}"):
        answer = await open_rest.get("/things/x", headers={"Host": host})
        assert answer.status == 200, host
    same = {"Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin"}
    answer = await open_rest.post("/things/x", headers={**same, "Content-Type": "application/json"})
    assert answer.status == 204


async def test_tokens_then_roles():
    CHANGES.clear()
    client = await client_for(Access(admin_tokens=frozenset({Token(TOKEN)})))
    try:
        json_type = {"Content-Type": "application/json"}
        answer = await client.post("/things/x", headers=json_type)
        assert answer.status == 401 and "Bearer" in answer.headers["WWW-Authenticate"]
        answer = await client.post(
            "/things/x", headers={**json_type, "Authorization": f"Bearer {TOKEN}"}
        )
        assert answer.status == 204
    finally:
        await client.close()


async def test_bodies_duplicate_keys_and_sizes(open_rest):
    json_type = {"Content-Type": "application/json"}
    answer = await open_rest.post("/things/x", data=b'{"a": 1, "a": 2}', headers=json_type)
    assert answer.status == 400 and "more than once" in (await answer.json())["reason"]
    answer = await open_rest.post("/things/x", data=b"[" + b"1," * 999 + b"1]", headers=json_type)
    assert answer.status == 413 and "at most 1000" in (await answer.json())["reason"]
    assert CHANGES == []


async def test_unknown_routes_and_methods_answer_json(open_rest):
    answer = await open_rest.get("/nowhere")
    assert answer.status == 404 and "reason" in await answer.json()
    answer = await open_rest.put("/things/x", headers={"Content-Type": "application/json"})
    assert answer.status == 405 and "Allow" in answer.headers


async def test_the_log_cannot_be_forged(open_rest, caplog):
    caplog.set_level(logging.DEBUG, logger="georep.test.rest")
    await open_rest.get("/things/a%0AINFO%20forged%00line")
    await open_rest.post("/things/b%0D%0Aforged", headers={"Content-Type": "text/plain"})
    lines = [r.getMessage() for r in caplog.records if r.name == "georep.test.rest"]
    assert len(lines) == 2
    for line in lines:
        assert "\n" not in line and "\r" not in line and "\x00" not in line


@pytest.mark.parametrize(
    ("text", "shown"),
    [("a\nb", "a\\nb"), ("nul\x00", "nul\\x00"), ("back\\slash", "back\\\\slash"),
     ("ünïcode", "ünïcode"), ("x" * 300, "x" * 200 + "...")],
)  # fmt: skip
def test_printable(text, shown):
    assert printable(text) == shown


def test_allowed_hosts_defaults():
    assert allowed_hosts("127.0.0.1", [], tokens_required=False) == LOOPBACK_NAMES
    assert "10.0.0.5" in allowed_hosts("10.0.0.5", [], tokens_required=False)
    assert ANY_HOST in allowed_hosts("0.0.0.0", [], tokens_required=True)
    assert ANY_HOST not in allowed_hosts("0.0.0.0", [], tokens_required=False)
    assert "gw.example" in allowed_hosts("0.0.0.0", ["GW.example"], tokens_required=False)


def test_exposure_beyond_loopback_needs_tokens_or_insecure():
    assert check_exposure("REST", "127.0.0.1", tokens_required=True, insecure=False) == ""
    assert "OPEN" in check_exposure("REST", "localhost", tokens_required=False, insecure=False)
    for host in ("0.0.0.0", "10.1.2.3", "::", "example.org"):
        with pytest.raises(ExposureError, match="--insecure"):
            check_exposure("REST", host, tokens_required=False, insecure=False)
        assert "OPEN" in check_exposure("REST", host, tokens_required=False, insecure=True)


def test_client_token_is_the_first_of_the_shared_variable():
    assert client_token({}, "GEOREP_ADMIN_TOKENS") is None
    value = f"{TOKEN}, other-token-0123456789"
    assert client_token({"GEOREP_ADMIN_TOKENS": value}, "GEOREP_ADMIN_TOKENS") == TOKEN
    with pytest.raises(TokenError):
        client_token({"GEOREP_ADMIN_TOKENS": "short"}, "GEOREP_ADMIN_TOKENS")
