"""WebSockets through the host (the ASGI ``websocket`` scope), on trio and asyncio, on 127.0.0.1.

A small echo app accepts (with the subprotocol ``mcp`` when offered), echoes
text and bytes, and records how the WebSocket ended; a wsproto client on an
anyio socket speaks to it.  Checked: the handshake and its refusals (the app's
close before accepting is a 403; a version other than 13 is 426), messages both
ways, fragments joined, the peer's close as ``websocket.disconnect``, a message
past ``max_message_size`` closed with 1009 while it grows, a peer that answers
no ping closed with 1011, and 1001 to an open WebSocket when the drain ends.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc
import pytest
from host_peer import STREAM_GONE, hosting, status_of
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)

pytestmark = pytest.mark.anyio


class EchoApp:
    def __init__(self) -> None:
        self.ended: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return  # (no lifespan: the host serves it all the same)
        assert scope["type"] == "websocket" and scope["scheme"] == "ws"
        assert (await receive())["type"] == "websocket.connect"
        if scope["path"] == "/refuse":
            await send({"type": "websocket.close", "code": 1008})
            return
        subprotocol = "mcp" if "mcp" in scope["subprotocols"] else None
        await send({"type": "websocket.accept", "subprotocol": subprotocol})
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                self.ended.append(message)
                return
            if message.get("text") == "bye":
                await send({"type": "websocket.close", "code": 1000, "reason": "bye"})
                self.ended.append({"type": "closed by the app"})
                return
            await send({**message, "type": "websocket.send"})


class WsPeer:
    """A WebSocket client: wsproto on an anyio socket."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.pending: list[Any] = []

    @classmethod
    async def connect(
        cls, port: int, target: str = "/ws", subprotocols: list[str] | None = None
    ) -> tuple[WsPeer, Any]:
        peer = cls(await anyio.connect_tcp("127.0.0.1", port))
        request = Request(host="127.0.0.1", target=target, subprotocols=subprotocols or [])
        await peer.stream.send(peer.ws.send(request))
        return peer, await peer.event()

    async def event(self) -> Any:
        while not self.pending:
            try:
                data: bytes | None = await self.stream.receive()
            except STREAM_GONE:
                data = None
            self.ws.receive_data(data)
            self.pending.extend(self.ws.events())
            if data is None and not self.pending:
                return None
        return self.pending.pop(0)

    async def send(self, event: Any) -> None:
        await self.stream.send(self.ws.send(event))


async def test_messages_both_ways_and_the_peers_close() -> None:
    app = EchoApp()
    with anyio.fail_after(10):
        async with hosting(app) as hosted:
            peer, accepted = await WsPeer.connect(hosted.port, subprotocols=["mcp"])
            assert isinstance(accepted, AcceptConnection) and accepted.subprotocol == "mcp"
            await peer.send(TextMessage(data="hello"))
            assert (await peer.event()).data == "hello"
            await peer.send(BytesMessage(data=b"\x00\x01"))
            assert (await peer.event()).data == b"\x00\x01"
            await peer.send(TextMessage(data="frag", message_finished=False))
            await peer.send(TextMessage(data="ments"))
            joined = await peer.event()
            assert (joined.data, joined.message_finished) == ("fragments", True)
            await peer.send(CloseConnection(code=1000, reason="done"))
            closed = await peer.event()
            assert isinstance(closed, CloseConnection) and closed.code == 1000
            await peer.stream.aclose()
            while not app.ended:
                await anyio.sleep(0.01)
            assert app.ended == [{"type": "websocket.disconnect", "code": 1000, "reason": "done"}]


async def test_the_app_closes_and_the_host_waits_for_the_peers_close() -> None:
    app = EchoApp()
    with anyio.fail_after(10):
        async with hosting(app) as hosted:
            peer, _ = await WsPeer.connect(hosted.port)
            await peer.send(TextMessage(data="bye"))
            closed = await peer.event()
            assert isinstance(closed, CloseConnection) and (closed.code, closed.reason) == (
                1000,
                "bye",
            )
            await peer.send(closed.response())
            end = await peer.event()  # then the host closes the TCP connection (wsproto: 1006)
            assert end is None or (isinstance(end, CloseConnection) and end.code == 1006)
            await peer.stream.aclose()


async def test_a_refused_handshake_is_a_403_and_an_unknown_version_a_426() -> None:
    with anyio.fail_after(10):
        async with hosting(EchoApp()) as hosted:
            peer, refused = await WsPeer.connect(hosted.port, "/refuse")
            assert isinstance(refused, RejectConnection) and refused.status_code == 403
            await peer.stream.aclose()
            head = (
                b"GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n"
            )
            reply = await hosted.raw(head)
            assert status_of(reply) == 426 and b"sec-websocket-version: 13" in reply


async def test_a_message_past_max_message_size_is_refused_while_it_grows() -> None:
    app = EchoApp()
    with anyio.fail_after(10):
        async with hosting(app, max_message_size=1000) as hosted:
            peer, _ = await WsPeer.connect(hosted.port)
            await peer.send(TextMessage(data="x" * 600, message_finished=False))
            await peer.send(TextMessage(data="x" * 600, message_finished=False))  # never ends
            closed = await peer.event()
            assert isinstance(closed, CloseConnection) and closed.code == 1009
            await peer.stream.aclose()
            while not app.ended:
                await anyio.sleep(0.01)
            assert app.ended[0]["code"] == 1009


async def test_a_peer_that_answers_no_ping_is_closed_with_1011() -> None:
    with anyio.fail_after(10):
        async with hosting(EchoApp(), ping_interval=0.2, ping_timeout=0.3) as hosted:
            peer, _ = await WsPeer.connect(hosted.port)
            ping = await peer.event()
            assert isinstance(ping, Ping)  # not answered
            closed = await peer.event()
            assert isinstance(closed, CloseConnection) and closed.code == 1011
            await peer.stream.aclose()


async def test_a_peer_that_answers_pings_stays() -> None:
    with anyio.fail_after(10):
        async with hosting(EchoApp(), ping_interval=0.1, ping_timeout=0.3) as hosted:
            peer, _ = await WsPeer.connect(hosted.port)
            for _ in range(4):
                ping = await peer.event()
                assert isinstance(ping, Ping)
                await peer.send(ping.response())
            await peer.send(TextMessage(data="still here"))
            while isinstance(event := await peer.event(), Ping):
                await peer.send(event.response())
            assert event.data == "still here"
            await peer.stream.aclose()


async def test_the_end_of_the_drain_closes_an_open_websocket_with_1001() -> None:
    with anyio.fail_after(10):
        async with hosting(EchoApp(), grace=0.3) as hosted:
            peer, _ = await WsPeer.connect(hosted.port)
            closing = anyio.Event()

            async def drain() -> None:
                await hosted.host.aclose(grace=0.3)
                closing.set()

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(drain)
                closed = await peer.event()
                assert isinstance(closed, CloseConnection) and closed.code == 1001
                await peer.send(closed.response())
                await closing.wait()
            await peer.stream.aclose()
