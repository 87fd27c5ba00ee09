"""Admin REST auth: the token matrix (401 vs 403 vs 2xx), the open mode and its warning,
settings from flags and environment, and tokens never shown in logs or reprs."""

from __future__ import annotations

import argparse
import logging

import pytest

from georep.broker.admin import AdminSettings, AdminSettingsError
from georep.broker.admin.routes import ROUTES
from georep.broker.admin.state import SETTINGS
from georep.rest.auth import Role, authorize
from georep.rest.errors import Forbidden, Unauthorized
from georep.rest.tokens import ADMIN_READ_ONLY_TOKENS_ENV as READ_ONLY_TOKENS_ENV
from georep.rest.tokens import ADMIN_TOKENS_ENV, Token, tokens
from tests.unit.test_admin_support import ADMIN_TOKEN, READ_TOKEN, WRONG_TOKEN, running_admin

NONE = None
MALFORMED = "malformed"

# (token sent, status of a GET, status of a mutation)
MATRIX = [
    (NONE, 401, 401),
    (MALFORMED, 401, 401),
    (WRONG_TOKEN, 401, 401),
    (READ_TOKEN, 200, 403),
    (ADMIN_TOKEN, 200, 204),
]


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path}/meta.db"


@pytest.mark.parametrize(("token", "get_status", "mutation_status"), MATRIX)
async def test_token_matrix(sqlite_url: str, token, get_status: int, mutation_status: int) -> None:
    async with running_admin(sqlite_url, tokens=True) as admin:
        headers = {}
        if token is MALFORMED:
            headers, token = {"Authorization": f"Basic {ADMIN_TOKEN}"}, None
        got = await admin.get("/admin/v2/tenants", token=token, headers=headers)
        assert got.status == get_status
        changed = await admin.put("/admin/v2/tenants/acme", {}, token=token, headers=headers)
        assert changed.status == mutation_status
        if mutation_status == 401:
            assert changed.headers["WWW-Authenticate"].startswith("Bearer")
            assert "token" in changed.body["reason"]
        if mutation_status == 403:
            assert "read-only" in changed.body["reason"]
        # nothing was created unless the admin asked
        tenants = (await admin.get("/admin/v2/tenants", token=ADMIN_TOKEN)).body
        assert ("acme" in tenants) == (mutation_status == 204)


async def test_every_mutation_needs_the_admin_token(sqlite_url: str) -> None:
    async with running_admin(sqlite_url, tokens=True) as admin:
        for route in ROUTES:
            path = route.path.format(
                tenant="public", namespace="default", topic="t", subscription="s",
                timestamp="0", numMessages="1", version="0",
            )  # fmt: skip
            answer = await admin.request(route.method, path, token=READ_TOKEN)
            expected = {Role.ADMIN: 403, Role.READ: None, Role.PUBLIC: None}[route.role]
            if expected is not None:
                assert answer.status == expected, route
            else:
                assert answer.status not in (401, 403), route
            unauthenticated = await admin.request(route.method, path, token=None)
            if route.role is Role.PUBLIC:
                assert unauthenticated.status not in (401, 403), route
            else:
                assert unauthenticated.status == 401, route


async def test_public_routes_need_no_token(sqlite_url: str) -> None:
    async with running_admin(sqlite_url, tokens=True) as admin:
        for path in ("/health", "/metrics", "/admin/v2/openapi.json"):
            assert (await admin.get(path, token=None)).status == 200


async def test_open_mode_lets_everyone_in_and_says_so(sqlite_url: str, caplog) -> None:
    caplog.set_level(logging.INFO, logger="georep.broker.admin")
    async with running_admin(sqlite_url) as admin:
        assert (await admin.put("/admin/v2/tenants/acme", {}, token=None)).status == 204
        assert (await admin.get("/admin/v2/tenants/acme", token=WRONG_TOKEN)).status == 200
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "OPEN" in r.message]
    assert len(warnings) == 1


async def test_tokens_never_logged(sqlite_url: str, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    async with running_admin(sqlite_url, tokens=True) as admin:
        await admin.get("/admin/v2/tenants", token=WRONG_TOKEN)
        await admin.put("/admin/v2/tenants/acme", {}, token=READ_TOKEN)
        await admin.put("/admin/v2/tenants/acme", {})
        settings_text = repr(admin.app[SETTINGS])
    text = caplog.text + settings_text
    for token in (ADMIN_TOKEN, READ_TOKEN, WRONG_TOKEN):
        assert token not in text
    messages = "\n".join(caplog.messages)  # not caplog.text: it carries line numbers
    assert "2 admin" not in messages and "1 admin" in messages


def test_authorize_table() -> None:
    settings = AdminSettings("A", "sqlite:///x.db", admin_tokens=tokens([ADMIN_TOKEN]),
                             read_only_tokens=tokens([READ_TOKEN]))  # fmt: skip
    assert authorize(settings, None, Role.PUBLIC) is None
    assert authorize(settings, f"Bearer {ADMIN_TOKEN}", Role.ADMIN) is Role.ADMIN
    assert authorize(settings, f"bearer  {ADMIN_TOKEN} ", Role.READ) is Role.ADMIN
    assert authorize(settings, f"Bearer {READ_TOKEN}", Role.READ) is Role.READ
    with pytest.raises(Forbidden):
        authorize(settings, f"Bearer {READ_TOKEN}", Role.ADMIN)
    for header in (None, "", "Bearer", "Bearer ", f"Token {ADMIN_TOKEN}", f"Bearer a {ADMIN_TOKEN}",
                   f"Bearer {ADMIN_TOKEN}x", "Bearer ünïcode"):  # fmt: skip
        with pytest.raises(Unauthorized):
            authorize(settings, header, Role.READ)
    open_settings = AdminSettings("A", "sqlite:///x.db")
    assert open_settings.open
    assert authorize(open_settings, None, Role.ADMIN) is None


# --- settings -------------------------------------------------------------------------
def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    AdminSettings.add_arguments(parser)
    return parser.parse_args(argv)


def test_settings_from_flags_and_environment(tmp_path) -> None:
    token_file = tmp_path / "admin.tokens"
    token_file.write_text(f"# operators\n\n{ADMIN_TOKEN}\n")
    args = _parse(["--admin-port", "0", "--admin-token-file", str(token_file)])
    other = "second-admin-token-0123456789"
    environ = {ADMIN_TOKENS_ENV: f" {other} ,", READ_ONLY_TOKENS_ENV: READ_TOKEN}
    settings = AdminSettings.from_args(
        args, environ, cluster_name="A", metadata_url="sqlite:///m.db"
    )
    assert settings.port == 0
    assert settings.admin_tokens == {Token(ADMIN_TOKEN), Token(other)}
    assert settings.read_only_tokens == {Token(READ_TOKEN)}
    assert not settings.open
    assert ADMIN_TOKEN not in repr(settings) and ADMIN_TOKEN not in str(settings.admin_tokens)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"cluster_name": "a/b"}, "cluster name"),
        ({"cluster_name": "c" * 65}, "at most 64"),
        ({"metadata_url": ""}, "metadata URL"),
        ({"port": 70_000}, "0..65535"),
        ({"admin_tokens": ["short"]}, "characters"),
        ({"admin_tokens": ["has space in it 0123"]}, "only letters"),
        ({"read_only_tokens": [READ_TOKEN]}, "no admin token"),
        ({"admin_tokens": [ADMIN_TOKEN], "read_only_tokens": [ADMIN_TOKEN]}, "both"),
        ({"tls_cert_file": "cert.pem"}, "both --admin-tls-cert"),
        ({"request_body_bytes_max": 0}, "request body limit"),
    ],
)
def test_bad_settings_are_refused(changes: dict, words: str) -> None:
    arguments = {"cluster_name": "A", "metadata_url": "sqlite:///m.db", **changes}
    with pytest.raises(AdminSettingsError, match=words) as caught:
        AdminSettings(**arguments)
    for token in (ADMIN_TOKEN, READ_TOKEN, "short", "has space in it 0123"):
        assert token not in str(caught.value)


def test_missing_token_file_is_a_clear_error(tmp_path) -> None:
    args = _parse(["--admin-token-file", str(tmp_path / "none")])
    with pytest.raises(AdminSettingsError, match="cannot read token file"):
        AdminSettings.from_args(args, {}, cluster_name="A", metadata_url="sqlite:///m.db")
