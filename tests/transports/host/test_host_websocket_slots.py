"""WebSocket slots under attack (issue 22, item 7), on trio and asyncio, on 127.0.0.1.

``WsServer`` (the endpoint on the host) with a small pool: sockets that never send
their upgrade cannot keep a real client out (the host evicts the longest waiter
for a newcomer); one client holds at most ``max_websockets_per_client`` WebSockets
(429 past it) while a client from another address still connects; and a frame
whose header announces more than ``max_message_size`` (2^63 - 1, 2^63, or just
over the bound) is closed with 1009 as soon as the header is read, not as its
payload arrives.  Clients from other addresses are real sockets bound to
127.0.0.2 and 127.0.0.3 (the loopback network is all of 127/8).
"""

from __future__ import annotations

import json
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import pytest
from host_peer import STREAM_GONE
from mrtr_transports.server.ws import WsServer
from support import srv_apps
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    CloseConnection,
    RejectConnection,
    Request,
    TextMessage,
)

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def serving(**options: Any) -> AsyncIterator[tuple[WsServer, int]]:
    server = WsServer(srv_apps.TestApp(), **options)
    async with anyio.create_task_group() as tasks:
        _, port = await tasks.start(server.serve)
        yield server, port
        tasks.cancel_scope.cancel()


class Peer:
    """A WebSocket client from ``local`` (an address of 127/8): wsproto on an anyio socket."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.pending: list[Any] = []

    @classmethod
    async def connect(cls, port: int, local: str = "127.0.0.1") -> tuple[Peer, Any]:
        peer = cls(await anyio.connect_tcp("127.0.0.1", port, local_host=local))
        request = Request(host="127.0.0.1", target="/mcp", subprotocols=["mcp"])
        await peer.stream.send(peer.ws.send(request))
        return peer, await peer.event()

    async def event(self) -> Any:
        while not self.pending:
            try:
                data: bytes | None = await self.stream.receive()
            except (anyio.EndOfStream, *STREAM_GONE):
                data = None
            self.ws.receive_data(data)
            self.pending.extend(self.ws.events())
            if data is None and not self.pending:
                return None
        return self.pending.pop(0)


async def accepted(port: int, local: str = "127.0.0.1") -> Peer:
    peer, event = await Peer.connect(port, local)
    assert isinstance(event, AcceptConnection), event
    return peer


async def refused(port: int, local: str = "127.0.0.1") -> tuple[int, dict[str, Any]]:
    """A handshake refused: its status and its JSON-RPC body."""
    peer, event = await Peer.connect(port, local)
    assert isinstance(event, RejectConnection), event
    status = event.status_code
    body = b""
    while event.has_body:
        data = await peer.event()
        body += bytes(data.data)
        if data.body_finished:
            break
    await peer.stream.aclose()
    return status, json.loads(body)


# --- the pool filled by sockets that send nothing ---


async def test_silent_sockets_filling_the_pool_cannot_keep_a_websocket_client_out() -> None:
    # The attack of issue 22 (every newcomer got 503 while the sockets lasted); the host's
    # eviction of connections without a whole request already held on main: kept as the
    # reproduction, with half-sent upgrade heads too.
    with anyio.fail_after(10):
        async with serving(max_connections=8, handshake_timeout=30.0) as (_, port):
            silent = [await anyio.connect_tcp("127.0.0.1", port) for _ in range(8)]
            for sock in silent[4:]:
                await sock.send(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: webso")
            await anyio.sleep(0.1)
            started = anyio.current_time()
            peer = await accepted(port)  # at once, not after the handshake timeout
            assert anyio.current_time() - started < 1.0
            await peer.stream.aclose()
            for sock in silent:
                await sock.aclose()


# --- each client's share of the WebSockets ---


async def test_one_client_at_its_share_is_refused_and_another_connects() -> None:
    with anyio.fail_after(10):
        async with serving(max_connections=8, max_websockets_per_client=2) as (server, port):
            mine = [await accepted(port) for _ in range(2)]
            status, body = await refused(port)
            assert status == 429
            assert body["error"]["code"] == -32000
            assert "max_websockets_per_client=2" in body["error"]["message"]
            others = [await accepted(port, "127.0.0.2"), await accepted(port, "127.0.0.3")]
            # Its place freed, the first client connects again.
            await mine[0].stream.aclose()
            with anyio.fail_after(5):
                while server.endpoint.websockets.shares.held_by("peer:127.0.0.1") > 1:
                    await anyio.sleep(0.01)
            mine[0] = await accepted(port)
            for peer in mine + others:
                await peer.stream.aclose()


# --- a frame header announcing more than the bound ---


def text_frame_header(length: int) -> bytes:
    """A masked text frame's header announcing ``length`` bytes (the shortest form)."""
    mask = b"\x00\x00\x00\x00"
    if length < 2**16:
        return bytes([0x81, 0x80 | 126]) + struct.pack("!H", length) + mask
    return bytes([0x81, 0x80 | 127]) + struct.pack("!Q", length) + mask


@pytest.mark.parametrize("length", [2**63, 2**63 - 1, 5000])
async def test_a_frame_announcing_more_than_the_bound_is_closed_with_1009_at_once(
    length: int,
) -> None:
    with anyio.fail_after(10):
        async with serving(max_message_size=4096, ping_interval=30.0) as (_, port):
            peer = await accepted(port)
            await peer.stream.send(text_frame_header(length) + b"x" * 16)  # and no more
            started = anyio.current_time()
            with anyio.fail_after(2):  # (before the fix: no answer until the bytes came)
                closed = await peer.event()
            assert isinstance(closed, CloseConnection) and closed.code == 1009
            assert anyio.current_time() - started < 0.5
            assert "max_message_size" in closed.reason
            await peer.stream.aclose()


async def test_frames_within_the_bound_are_read_as_before() -> None:
    with anyio.fail_after(10):
        async with serving(max_message_size=4096) as (_, port):
            peer = await accepted(port)
            ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            await peer.stream.send(peer.ws.send(TextMessage(data=json.dumps(ping))))
            answer = await peer.event()
            assert isinstance(answer, TextMessage) and json.loads(answer.data)["id"] == 1
            await peer.stream.aclose()
