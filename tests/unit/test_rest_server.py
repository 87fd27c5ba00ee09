"""RestRunner over a real socket: a malformed request's bytes (a token among them) are
neither echoed nor logged, and a connection that sends no whole request is closed."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiohttp import web

from georep.rest.server import RestRunner
from georep.runtime.awaiting import within

TOKEN = "s3cret-token-0123456789abcdef"


@pytest.fixture
async def server():
    async def hello(_request: web.Request) -> web.Response:
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = RestRunner(app, idle_s=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield runner.addresses[0][1]
    await runner.cleanup()


async def _exchange(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await within(reader.read(), 10)
    finally:
        writer.close()


@pytest.mark.parametrize(
    "header",
    [
        f"Authorization: Bearer {TOKEN}\x01",
        f"Authorization : Bearer {TOKEN}",
        f"Authorization: Bearer {TOKEN}\x7f",
        f"X-Forwarded-For: {TOKEN}\x00",
    ],
)
async def test_a_malformed_header_is_neither_echoed_nor_logged(server, caplog, header):
    caplog.set_level(logging.DEBUG)
    answer = await _exchange(
        server, f"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n{header}\r\n\r\n".encode("latin-1")
    )
    assert answer.split(b"\r\n", 1)[0].endswith(b" 400 Bad Request")
    assert TOKEN[:8].encode() not in answer
    logged = "\n".join(
        record.getMessage() + (str(record.exc_info) if record.exc_info else "")
        for record in caplog.records
    )
    assert TOKEN[:8] not in logged
    assert "unparsable request" in logged


async def test_a_good_request_is_served(server):
    answer = await _exchange(server, b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.split(b"\r\n", 1)[0].endswith(b" 200 OK") and answer.endswith(b"hello")


@pytest.mark.parametrize("sent", [b"", b"GET / HTTP/1.1\r\nHost: x\r\n"])
async def test_a_connection_without_a_whole_request_is_closed(server, sent):
    """Nothing at all, or a head that never ends: the server closes (read() returns)."""
    assert await _exchange(server, sent) == b""
