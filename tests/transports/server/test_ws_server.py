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
            assert discover.result["_meta"][m.wire.META_SERVER_INFO]["name"] == "srv-test"
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
            # Cut at handshake_timeout (the host's head deadline), told so as on HTTP, closed.
            reply = await read_all(slow)
            assert reply.startswith(b"HTTP/1.1 408 ") and b"0.3 s" in reply, reply
            silent = await trio.open_tcp_stream(*address)  # not a byte: closed, nothing said
            with trio.fail_after(3):
                assert await read_all(silent) == b""


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
                m.wire.META_PROTOCOL_VERSION: "2026-07-28",
                m.wire.META_CLIENT_CAPABILITIES: {},
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
            assert error["error"]["code"] == m.ErrorCode.PARSE_ERROR and "id" not in error
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
                            m.wire.META_PROTOCOL_VERSION: "2026-07-28",
                            m.wire.META_CLIENT_CAPABILITIES: {},
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
    # named: the frames carry a random mask, and xdist workers must collect the same ids
    ids=["not-utf-8", "reserved-opcode", "fragmented-ping"],
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
        async with serving(ping_interval=0.1, ping_timeout=1.0) as (server, address):
            lively = await open_peer(address)
            silent = await open_peer(address)
            silent.answer_pings = False
            # (reads for 1.5 s, answering pings; ping_timeout is generous for a loaded machine)
            await lively.read_messages_for(1.5)
            assert lively.pings >= 3
            closed = await silent.wait_closed()
            assert closed.code == 1011 and "no pong within 1 s" in (closed.reason or "")
            while len(server.connections) > 1:  # the silent one is dropped, the lively one stays
                await trio.sleep(0.01)
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
            assert end == m.engine.Done(result=end.result)
            assert end.result["content"][0]["text"] == "Trip to Oslo: cold but bright"
            legs = [e.event for e in seen if isinstance(e, m.CallEvent)]
            assert [
                type(leg).__name__ for leg in legs if not isinstance(leg, m.engine.RoundStarted)
            ] == [
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


async def test_roots_sampling_and_state_only_rounds() -> None:
    with trio.fail_after(10):
        async with serving() as (_, address):
            peer = await open_peer(address)
            roots = m.wire.ListRootsResult(roots=[m.wire.Root(uri="file:///srv/data")])
            end, _ = await peer.call("roots", answers={"where": roots})
            assert end.result["content"][0]["text"] == "file:///srv/data"
            end, _ = await peer.call("ask_sampling", answers={"tone": TONE})
            assert end.result["content"][0]["text"] == "sampled"
            end, _ = await peer.call("pause")
            assert end.result["content"][0]["text"] == "resumed after a state-only round"
            await peer.close()


async def test_asking_beyond_the_declared_capabilities_is_32021() -> None:
    with trio.fail_after(10):
        async with serving() as (_, address):
            peer = await open_peer(address, capabilities={"elicitation": {}})
            reply = await peer.request("tools/call", {"name": "ask_sampling", "arguments": {}})
            assert isinstance(reply, m.ErrorResponse)
            assert reply.error.code == m.ErrorCode.MISSING_CLIENT_CAPABILITY
            await peer.close()


async def test_a_tampered_request_state_is_refused() -> None:
    with trio.fail_after(10):
        async with serving() as (_, address):
            peer = await open_peer(address)
            first = await peer.request("tools/call", {"name": "trip", "arguments": {}})
            assert isinstance(first, m.ResultResponse)
            assert first.result["resultType"] == "input_required"
            city = {"city": {"action": "accept", "content": {"city": "Oslo"}}}
            retry = {"name": "trip", "arguments": {}, "inputResponses": city}
            second = await peer.request("tools/call", retry)
            assert isinstance(second, m.ResultResponse)
            state = second.result["requestState"]
            tone = {
                "tone": {
                    "role": "assistant",
                    "content": {"type": "text", "text": "x"},
                    "model": "t",
                }
            }
            tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
            leg = {
                "name": "trip",
                "arguments": {},
                "inputResponses": tone,
                "requestState": tampered,
            }
            refused = await peer.request("tools/call", leg)
            assert isinstance(refused, m.ErrorResponse), refused
            assert refused.error.code == m.ErrorCode.INVALID_PARAMS
            await peer.close()


async def test_progress_and_log_lines_reach_the_client() -> None:
    with trio.fail_after(10):
        async with serving() as (_, address):
            peer = await open_peer(address, log_level="info")
            end, seen = await peer.call("progress", progress=True)
            assert end.result["content"][0]["text"] == "progressed"
            progress = [(p.progress, p.total) for p in seen if isinstance(p, m.Progress)]
            assert progress == [(1, 3), (2, 3), (3, 3)]
            logs = [n.params for n in seen if isinstance(n, m.Notification)]
            assert logs == [{"level": "info", "data": {"note": "halfway"}, "logger": "srv"}]
            await peer.close()


async def test_cancellation_on_the_wire_stops_the_handler_and_nothing_is_answered() -> None:
    with trio.fail_after(10):
        app = srv_apps.TestApp()
        async with serving(app) as (_, address):
            peer = await open_peer(address)
            handle = peer.conn.call("tools/call", {"name": "sleep"}, now=trio.current_time())
            send = await peer.event()
            assert isinstance(send.event, m.engine.SendRequest)
            leg = peer.conn.send(send)
            leg_id = json.loads(leg)["id"]
            await peer.write(leg)
            while app.counts["started"] < 1:
                await trio.sleep(0.01)
            peer.conn.cancel(handle)
            cancel = await peer.event()
            assert isinstance(cancel.event, m.engine.CancelLeg)
            await peer.write(peer.conn.send(cancel))  # notifications/cancelled
            assert (await peer.event()).event == m.engine.Cancelled()
            while app.counts["cancelled"] < 1:  # the handler was really stopped
                await trio.sleep(0.01)
            echo = await peer.request("tools/call", {"name": "echo", "arguments": {"text": "x"}})
            assert isinstance(echo, m.ResultResponse)
            await peer.close()
        assert leg_id not in [msg.get("id") for msg in peer.received]


async def test_a_2025_client_is_served_through_the_legacy_shim() -> None:
    with trio.fail_after(10):
        async with serving() as (_, address):
            peer = await open_peer(address, era="legacy")
            opened = await peer.event()
            assert isinstance(opened, m.SessionOpened) and opened.era == "legacy"
            legacy_answers = {
                "elicitation/create": {"action": "accept", "content": {"city": "Bergen"}},
                "sampling/createMessage": {
                    "role": "assistant",
                    "content": {"type": "text", "text": "wet and lovely"},
                    "model": "test-llm",
                },
                "roots/list": {"roots": [{"uri": "file:///srv/data"}]},
            }
            end, seen = await peer.call("trip", legacy_answers=legacy_answers)
            assert end.result["content"][0]["text"] == "Trip to Bergen: wet and lovely"
            asked = [e.method for e in seen if isinstance(e, m.Request)]
            assert asked == ["elicitation/create", "sampling/createMessage"]
            end, _ = await peer.call("pause", legacy_answers=legacy_answers)
            assert end.result["content"][0]["text"] == "resumed after a state-only round"
            await peer.close()
        assert all("resultType" not in msg.get("result", {}) for msg in peer.received)


async def test_a_legacy_request_cancelled_while_the_client_is_asked() -> None:
    with trio.fail_after(10):
        async with serving() as (_, address):
            peer = await open_peer(address, era="legacy")
            assert isinstance(await peer.event(), m.SessionOpened)
            rid = peer.conn.new_request_id()
            call = {"name": "trip", "arguments": {}}
            await peer.write(peer.conn.send(m.Request(id=rid, method="tools/call", params=call)))
            question = await peer.event()
            assert isinstance(question, m.Request) and question.method == "elicitation/create"
            note = {"requestId": rid, "reason": "changed my mind"}
            await peer.write(
                peer.conn.send(m.Notification(method="notifications/cancelled", params=note))
            )
            assert await peer.event() == m.RequestCancelled(request_id=question.id)
            await peer.close()
        assert rid not in {msg.get("id") for msg in peer.received}


# --- the end of a conversation ---


async def test_a_client_close_cancels_its_handlers_only() -> None:
    with trio.fail_after(10):
        app = srv_apps.TestApp()
        async with serving(app) as (server, address):
            leaving = await open_peer(address)
            staying = await open_peer(address)
            call = {"name": "sleep", "arguments": {}}
            await leaving.write(
                leaving.conn.send(m.Request(id=1, method="tools/call", params=call))
            )
            while app.counts["started"] < 1:
                await trio.sleep(0.01)
            closed = await leaving.close()
            assert closed.code == 1000
            while app.counts["cancelled"] < 1:
                await trio.sleep(0.01)
            echo = await staying.request("tools/call", {"name": "echo", "arguments": {"text": "y"}})
            assert isinstance(echo, m.ResultResponse)
            while len(server.connections) > 1:
                await trio.sleep(0.01)
            await staying.close()


async def test_one_client_leaving_does_not_end_the_listen_streams_of_others() -> None:
    from mrtr_transports.cli.app_loading import load_app

    with trio.fail_after(10):
        async with serving(load_app("mrtr_transports.apps.example:app")) as (server, address):
            peers = [await open_peer(address) for _ in range(2)]
            listen = {"notifications": {"toolsListChanged": True}}
            for peer in peers:
                await peer.write(
                    peer.conn.send(m.Request(id=5, method="subscriptions/listen", params=listen))
                )
                ack = await peer.event()
                assert isinstance(ack, m.Notification), ack
                assert ack.method == "notifications/subscriptions/acknowledged"
            await peers[0].close()
            while len(server.connections) > 1:  # its conversation is over on the server too
                await trio.sleep(0.01)
            # The other stream is still open: the next message is our echo's answer.
            reply = await peers[1].request(
                "tools/call", {"name": "echo", "arguments": {"text": "still here"}}
            )
            assert peers[1].other == []  # no final result of its listen stream came
            assert isinstance(reply, m.ResultResponse | m.ErrorResponse)
            await peers[1].close()


async def test_shutdown_closes_every_websocket_with_1001() -> None:
    with trio.fail_after(10):
        server = WsServer(srv_apps.TestApp())
        async with trio.open_nursery() as nursery:
            address = await nursery.start(server.serve)
            peers = [await open_peer(address) for _ in range(2)]
            nursery.cancel_scope.cancel()
        for peer in peers:
            closed = await peer.wait_closed()
            assert closed.code == 1001 and "shutting down" in (closed.reason or "")


async def test_past_max_connections_a_newcomer_gets_503() -> None:
    with trio.fail_after(10):
        async with serving(max_connections=2) as (server, address):
            peers = [await open_peer(address) for _ in range(2)]
            refused = await connect(address)
            assert isinstance(refused, Refused) and refused.status == 503
            assert refused.json()["error"]["code"] == m.ErrorCode.SERVER_BUSY
            await peers[0].close()
            while len(server.connections) > 1:
                await trio.sleep(0.01)
            again = await open_peer(address)
            await again.close()
            await peers[1].close()


def test_bounds_must_be_positive() -> None:
    for option in ("max_message_size", "ping_interval", "max_connections"):
        with pytest.raises(ValueError, match=option):
            WsServer(srv_apps.TestApp(), **{option: 0})
    with pytest.raises(ValueError, match="path"):
        WsServer(srv_apps.TestApp(), path="mcp")


async def test_a_peer_that_stops_reading_is_dropped_after_write_timeout() -> None:
    with trio.fail_after(30):
        options = {"write_timeout": 0.5, "max_message_size": 2 * 1024 * 1024}
        async with serving(**options) as (server, address):
            stuck = await open_peer(address)
            text = "x" * (1024 * 1024)
            for rid in range(40):  # 40 MiB of answers: more than any socket buffer holds
                call = {"name": "echo", "arguments": {"text": text}}
                request = m.Request(id=rid, method="tools/call", params=call)
                try:
                    await stuck.write(stuck.conn.send(request))
                except trio.BrokenResourceError:
                    break  # dropped while we were still sending
            while server.connections:  # ... and we never read a byte
                await trio.sleep(0.05)
            other = await open_peer(address)  # the server itself is fine
            assert isinstance(await other.request("server/discover"), m.ResultResponse)
            await other.close()
