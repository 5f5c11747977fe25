"""``McpAsgi``'s WebSocket side in memory: the ASGI ``websocket`` messages of a handshake
and a conversation, exactly as a server hands them over (no socket, both loops).

The refusals in the HTTP side's order with their statuses and JSON-RPC bodies (the
denial-response extension), the accept with ``mcp``, messages both ways, the core's
rules on what a message may be (invalid JSON goes on, binary 1003, too big 1009), the
drain (``shutdown()``: no more requests, then 1001) and ``websocket_only``'s 400.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mrtr_transports.asgi import McpAsgi
from support.asgi_servers import META
from support.asgi_ws_app import mcp

import mrtr_core as m

pytestmark = pytest.mark.anyio

Message = dict[str, Any]


def ws_scope(
    path: str = "/mcp",
    subprotocols: tuple[str, ...] = ("mcp",),
    headers: tuple[tuple[bytes, bytes], ...] = ((b"host", b"127.0.0.1:8000"),),
) -> Message:
    return {
        "type": "websocket",
        "path": path,
        "root_path": "",
        "headers": list(headers),
        "subprotocols": list(subprotocols),
        "client": ("127.0.0.1", 50000),
        "extensions": {"websocket.http.response": {}},
    }


class Server:
    """The server's side of one scope: what it hands the app, what the app sent."""

    def __init__(self) -> None:
        self.inbox_in, self.inbox = anyio.create_memory_object_stream[Message](16)
        self.outbox, self.outbox_out = anyio.create_memory_object_stream[Message](64)
        self.done = anyio.Event()

    async def receive(self) -> Message:
        return await self.inbox.receive()

    async def send(self, message: Message) -> None:
        await self.outbox.send(message)

    async def hand(self, message: Message) -> None:
        await self.inbox_in.send(message)

    async def text(self, payload: Any) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        await self.hand({"type": "websocket.receive", "text": text})

    async def next(self) -> Message:
        return await self.outbox_out.receive()


@asynccontextmanager
async def scope_of(endpoint: McpAsgi, scope: Message) -> AsyncIterator[Server]:
    server = Server()

    async def run() -> None:
        try:
            await endpoint(scope, server.receive, server.send)
        finally:
            server.done.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run)
        await server.hand({"type": "websocket.connect"})
        yield server
        with anyio.fail_after(10):
            await server.done.wait()


async def refusal(endpoint: McpAsgi, scope: Message) -> tuple[int, dict[bytes, bytes], Any]:
    async with scope_of(endpoint, scope) as server:
        start, body = await server.next(), await server.next()
    assert start["type"] == "websocket.http.response.start"
    assert body["type"] == "websocket.http.response.body"
    return start["status"], dict(start["headers"]), json.loads(body["body"])


def discover(rid: int) -> Message:
    return {"jsonrpc": "2.0", "id": rid, "method": "server/discover", "params": {"_meta": META}}


async def test_refusals_in_the_http_order_with_json_rpc_bodies() -> None:
    endpoint = McpAsgi(mcp, allowed_origins=["https://app.example"])
    evil = (b"origin", b"https://evil.example")
    cases: list[tuple[Message, int, str]] = [
        (ws_scope(headers=((b"host", b"a"), (b"host", b"b"))), 400, "multiple Host"),
        (ws_scope(headers=((b"host", b"rebound.example"),)), 403, "allowed_hosts"),
        # The policy first, as on HTTP: a foreign Origin at a wrong path is a 403.
        (ws_scope("/other", headers=((b"host", b"127.0.0.1"), evil)), 403, "allowed_origins"),
        (ws_scope("/other"), 404, "'/mcp'"),
        (ws_scope(subprotocols=("chat", "MCP")), 400, "offered: chat, MCP"),
    ]
    with anyio.fail_after(10):
        for scope, status, words in cases:
            got, headers, body = await refusal(endpoint, scope)
            assert (got, words in body["error"]["message"]) == (status, True), body
            assert "id" not in body and headers[b"connection"] == b"close"
            assert body["error"]["code"] == m.ErrorCode.INVALID_REQUEST


async def test_a_conversation_messages_both_ways_and_the_peers_close() -> None:
    endpoint = McpAsgi(mcp)
    with anyio.fail_after(10):
        async with scope_of(endpoint, ws_scope()) as server:
            assert await server.next() == {"type": "websocket.accept", "subprotocol": "mcp"}
            await server.text(discover(1))
            answer = json.loads((await server.next())["text"])
            assert answer["id"] == 1 and answer["result"]["supportedVersions"] == ["2026-07-28"]
            await server.text('{"jsonrpc": "2.0", "id": 2, "meth')  # invalid JSON: goes on
            error = json.loads((await server.next())["text"])
            assert error["error"]["code"] == m.ErrorCode.PARSE_ERROR and "id" not in error
            await server.text("")  # an empty message is no message
            call = {"name": "echo", "arguments": {"text": "hi"}, "_meta": META}
            await server.text({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
            echo = json.loads((await server.next())["text"])
            assert echo["id"] == 3 and echo["result"]["content"][0]["text"] == "hi"
            assert len(endpoint.websockets.conversations) == 1
            await server.hand({"type": "websocket.disconnect", "code": 1000})
        assert not endpoint.websockets.conversations  # and nothing more was sent
        with pytest.raises(anyio.WouldBlock):
            server.outbox_out.receive_nowait()


@pytest.mark.parametrize(
    ("message", "code", "words"),
    [
        ({"type": "websocket.receive", "bytes": b"{}"}, 1003, "binary"),
        ({"type": "websocket.receive", "text": "[" + " " * 600 + "]"}, 1009, "max_message_size"),
    ],
    ids=["binary", "too-big"],
)
async def test_what_is_no_mcp_message_closes_with_the_cores_code(
    message: Message, code: int, words: str
) -> None:
    endpoint = McpAsgi(mcp, max_message_size=500)
    with anyio.fail_after(10):
        async with scope_of(endpoint, ws_scope()) as server:
            assert (await server.next())["type"] == "websocket.accept"
            await server.hand(message)
            closed = await server.next()
            assert (closed["type"], closed["code"]) == ("websocket.close", code)
            assert words in closed["reason"]


async def test_shutdown_stops_reading_then_closes_with_1001_and_refuses_newcomers() -> None:
    endpoint = McpAsgi(mcp)
    with anyio.fail_after(10):
        async with scope_of(endpoint, ws_scope()) as server:
            assert (await server.next())["type"] == "websocket.accept"
            await server.text(discover(1))
            assert json.loads((await server.next())["text"])["id"] == 1
            endpoint.shutdown()
            closed = await server.next()
            assert (closed["type"], closed["code"]) == ("websocket.close", 1001)
            assert "shutting down" in closed["reason"]
        status, headers, body = await refusal(endpoint, ws_scope())
        assert (status, headers[b"retry-after"]) == (503, b"1")
        assert body["error"]["code"] == m.ErrorCode.SERVER_BUSY


async def test_websocket_only_refuses_plain_http_at_the_path() -> None:
    endpoint = McpAsgi(mcp, websocket_only=True, health_path=None)
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "GET", "path": "/mcp", "headers": [(b"host", b"localhost")]}
    await endpoint(scope, receive, send)
    assert sent[0]["status"] == 400 and (b"connection", b"close") in sent[0]["headers"]
    assert "not a WebSocket upgrade" in json.loads(sent[1]["body"])["error"]["message"]
