"""The WebSocket server on a real socket, driven by a raw wsproto client (support.ws_peer).

Each test serves ``srv_apps.TestApp`` in-process on 127.0.0.1, port 0; the
client side is wsproto frames under a client ``mrtr_core.Connection``, so
every byte on the wire is what a test wrote or what the server sent.  The
MRTR scenarios are those of the stdio tests (the transport is one long
conversation like stdio); the rest is the WebSocket's own: the handshake,
frames, sizes, keep-alive and close codes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from mrtr_transports.server.app import ServerApp
from mrtr_transports.server.ws import WsServer
from support import srv_apps
from support.ws_peer import Refused, WsPeer, connect
from wsproto.events import BytesMessage, TextMessage

import mrtr_core as m

CITY = m.wire.ElicitResult(action="accept", content={"city": "Oslo"})
TONE = m.wire.CreateMessageResult(
    role="assistant", content={"type": "text", "text": "cold but bright"}, model="test-llm"
)
ANSWERS: dict[str, Any] = {"city": CITY, "tone": TONE}


@asynccontextmanager
async def serving(
    app: ServerApp | None = None, **options: Any
) -> AsyncIterator[tuple[WsServer, tuple[str, int]]]:
    server = WsServer(app if app is not None else srv_apps.TestApp(), **options)
    async with trio.open_nursery() as nursery:
        address = await nursery.start(server.serve)
        yield server, address
        nursery.cancel_scope.cancel()


async def open_peer(address: tuple[str, int], **options: Any) -> WsPeer:
    peer = await connect(address, **options)
    assert isinstance(peer, WsPeer), peer
    return peer


# --- the handshake ---


async def test_the_server_selects_mcp_and_discover_works() -> None:
    with trio.fail_after(10):
        async with serving() as (_, address):
            peer = await open_peer(address, subprotocols=("mcp.auth.s3cret", "chat", "mcp"))
            assert peer.subprotocol == "mcp"  # type: ignore[attr-defined]
            discover = await peer.request("server/discover")
            assert isinstance(discover, m.ResultResponse)
            assert discover.result["supportedVersions"] == ["2026-07-28"]
            assert discover.result["_meta"][m.protocol.META_SERVER_INFO]["name"] == "srv-test"
            closed = await peer.close()
            assert closed.code == 1000  # the server answers our close with ours


async def test_an_upgrade_without_the_mcp_subprotocol_is_refused() -> None:
    with trio.fail_after(10):
        async with serving() as (_, address):
            for offered in ((), ("chat",), ("MCP",)):
                refused = await connect(address, subprotocols=offered)
                assert isinstance(refused, Refused), refused
                assert refused.status == 400
                error = refused.json()["error"]
                assert "subprotocol 'mcp'" in error["message"]
                assert "id" not in refused.json()


async def test_a_foreign_origin_is_refused_with_403_and_an_allowed_one_accepted() -> None:
    with trio.fail_after(10):
        async with serving(allowed_origins=["https://app.example"]) as (_, address):
            refused = await connect(address, headers=[("Origin", "https://evil.example")])
            assert isinstance(refused, Refused) and refused.status == 403
            assert "allowed_origins" in refused.json()["error"]["message"]
            bad_host = await connect(address, headers=[("Origin", "http://localhost")])
            assert isinstance(bad_host, WsPeer)  # a local origin is fine
            await bad_host.close()
            good = await open_peer(address, headers=[("Origin", "https://app.example")])
            await good.close()


async def test_a_foreign_host_is_refused_with_403() -> None:
    with trio.fail_after(10):
        async with serving() as (_, (host, port)):
            stream = await trio.open_tcp_stream(host, port)
            await stream.send_all(
                b"GET /mcp HTTP/1.1\r\nHost: rebound.example\r\nUpgrade: websocket\r\n"
                b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mcp\r\n\r\n"
            )
            reply = await read_all(stream)
            assert reply.startswith(b"HTTP/1.1 403 "), reply
            assert b"allowed_hosts" in reply


async def read_all(stream: trio.SocketStream) -> bytes:
    data = b""
    while chunk := await stream.receive_some(65536):
        data += chunk
    return data


async def test_other_paths_get_404_and_plain_http_gets_400() -> None:
    with trio.fail_after(10):
        async with serving() as (_, address):
            refused = await connect(address, path="/other")
            assert isinstance(refused, Refused) and refused.status == 404
            stream = await trio.open_tcp_stream(*address)
            await stream.send_all(b"GET /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n")
            reply = await read_all(stream)
            assert reply.startswith(b"HTTP/1.1 400 "), reply
            assert b"not a WebSocket upgrade" in reply


async def test_a_handshake_too_big_or_too_slow_is_dropped() -> None:
    with trio.fail_after(10):
        async with serving(handshake_timeout=0.3) as (_, address):
            stream = await trio.open_tcp_stream(*address)
            await stream.send_all(b"GET /mcp HTTP/1.1\r\nX-Big: " + b"a" * 20000)
            reply = await read_all(stream)
            assert reply.startswith(b"HTTP/1.1 431 "), reply
            slow = await trio.open_tcp_stream(*address)
            await slow.send_all(b"GET /mcp HTTP/1.1\r\n")
            assert await read_all(slow) == b""  # closed after handshake_timeout


async def test_frames_right_behind_the_upgrade_request_are_read() -> None:
    """A client that pipelines its first message behind the upgrade loses nothing."""
    from wsproto import ConnectionType, WSConnection
    from wsproto.events import AcceptConnection, Request

    with trio.fail_after(10):
        async with serving() as (_, (host, port)):
            stream = await trio.open_tcp_stream(host, port)
            ws = WSConnection(ConnectionType.CLIENT)
            data = ws.send(Request(host=f"{host}:{port}", target="/mcp", subprotocols=["mcp"]))
            meta = {
                m.protocol.META_PROTOCOL_VERSION: "2026-07-28",
                m.protocol.META_CLIENT_CAPABILITIES: {},
            }
            discover = {"jsonrpc": "2.0", "id": 7, "method": "server/discover"}
            message = json.dumps({**discover, "params": {"_meta": meta}}).encode()
            await stream.send_all(data + frame_text(message))
            received = b""
            while b"supportedVersions" not in received:
                chunk = await stream.receive_some(65536)
                assert chunk
                received += chunk
            ws.receive_data(received)
            events = list(ws.events())
            assert isinstance(events[0], AcceptConnection)
            answer = json.loads(events[1].data)
            assert answer["id"] == 7 and "supportedVersions" in answer["result"]


def frame_text(payload: bytes, *, opcode: int = 0x1, fin: bool = True) -> bytes:
    """One masked client frame, written by hand (for what wsproto will not send)."""
    import os

    mask = os.urandom(4)
    head = bytes([(0x80 if fin else 0) | opcode])
    size = len(payload)
    if size < 126:
        head += bytes([0x80 | size])
    elif size < 65536:
        head += bytes([0x80 | 126]) + size.to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + size.to_bytes(8, "big")
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + mask + masked


# --- frames and sizes ---


async def test_invalid_json_gets_a_parse_error_and_the_socket_stays() -> None:
    with trio.fail_after(10):
        async with serving() as (_, address):
            peer = await open_peer(address)
            await peer.send_event(TextMessage(data='{"jsonrpc": "2.0", "id": 1, "meth'))
            texts = await peer.read_messages()
            error = json.loads(texts[0])
            assert error["error"]["code"] == m.protocol.PARSE_ERROR and "id" not in error
            await peer.send_event(TextMessage(data=""))  # an empty message is skipped
            discover = await peer.request("server/discover")
            assert isinstance(discover, m.ResultResponse)
            await peer.close()


async def test_a_binary_message_closes_with_1003() -> None:
    with trio.fail_after(10):
        async with serving() as (_, address):
            peer = await open_peer(address)
            await peer.send_event(BytesMessage(data=b'{"jsonrpc":"2.0","id":1}'))
            closed = await peer.wait_closed()
            assert closed.code == 1003 and "binary" in (closed.reason or "")


async def test_an_oversized_message_closes_with_1009_before_it_is_whole() -> None:
    with trio.fail_after(10):
        async with serving(max_message_size=1000) as (_, address):
            peer = await open_peer(address)
            # The first fragment alone passes the bound: the close comes while we could
            # still be sending the rest.
            await peer.send_event(TextMessage(data="[" + " " * 1200, message_finished=False))
            closed = await peer.wait_closed()
            assert closed.code == 1009 and "max_message_size" in (closed.reason or "")


async def test_a_fragmented_message_within_the_bound_is_one_message() -> None:
    with trio.fail_after(10):
        async with serving(max_message_size=1000) as (_, address):
            peer = await open_peer(address)
            message = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "server/discover",
                    "params": {
                        "_meta": {
                            m.protocol.META_PROTOCOL_VERSION: "2026-07-28",
                            m.protocol.META_CLIENT_CAPABILITIES: {},
                        }
                    },
                }
            )
            for i in range(0, len(message), 10):
                chunk = message[i : i + 10]
                await peer.send_event(
                    TextMessage(data=chunk, message_finished=i + 10 >= len(message))
                )
            answer = json.loads((await peer.read_messages())[0])
            assert answer["id"] == 3 and "supportedVersions" in answer["result"]
            await peer.close()


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (frame_text(b'"\xff\xfe"'), 1007),  # a text message that is not UTF-8
        (frame_text(b"x", opcode=0x3), 1002),  # a reserved opcode
        (frame_text(b"x", opcode=0x9, fin=False), 1002),  # a fragmented ping
    ],
)
async def test_frames_that_break_the_framing_close_the_socket(frame: bytes, code: int) -> None:
    with trio.fail_after(10):
        async with serving() as (_, address):
            peer = await open_peer(address)
            await peer.stream.send_all(frame)
            closed = await peer.wait_closed()
            assert closed.code == code, closed.reason


# --- keep-alive ---


async def test_pings_are_answered_and_a_peer_that_never_pongs_is_closed() -> None:
    with trio.fail_after(10):
        async with serving(ping_interval=0.1, ping_timeout=0.3) as (server, address):
            lively = await open_peer(address)
            silent = await open_peer(address)
            silent.answer_pings = False
            with trio.move_on_after(0.8):
                await lively.wait_closed()  # (reads, answering pings, for 0.8 s)
            assert lively.closed is None and lively.pings >= 3
            closed = await silent.wait_closed()
            assert closed.code == 1011 and "no pong" in (closed.reason or "")
            assert len(server.connections) == 1
            # Our pings are answered too.
            await lively.send_event(m_ping())
            await lively.close()


def m_ping() -> Any:
    from wsproto.events import Ping

    return Ping(payload=b"hi")


# --- MRTR, as on stdio ---


async def test_a_two_round_flow_with_a_sealed_state() -> None:
    with trio.fail_after(10):
        async with serving() as (_, address):
            peer = await open_peer(address)
            end, seen = await peer.call("trip", answers=ANSWERS)
            assert end == m.Done(result=end.result)
            assert end.result["content"][0]["text"] == "Trip to Oslo: cold but bright"
            legs = [e.event for e in seen if isinstance(e, m.CallEvent)]
            assert [type(leg).__name__ for leg in legs if not isinstance(leg, m.RoundStarted)] == [
                "SendRequest",
                "DispatchInput",
                "SendRetry",
                "DispatchInput",
                "SendRetry",
                "Done",
            ]
            second = [msg for msg in peer.received if "result" in msg][1]["result"]
            assert second["resultType"] == "input_required" and "tone" in second["inputRequests"]
            assert second["requestState"].startswith("mrtr1.k1.")
            await peer.close()
