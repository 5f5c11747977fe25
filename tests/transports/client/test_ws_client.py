"""The WebSocket client against the real WebSocket server (in-process, real sockets) and
against small misbehaving wsproto servers written here; ``mrtr call ws://`` end to end
against a ``mrtr serve --ws`` subprocess."""

from __future__ import annotations

import functools
import json
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from mrtr_transports.client.errors import CallTimeout, TransportError
from mrtr_transports.client.ws import WsLink, open_ws_client
from mrtr_transports.server.ws import WsServer
from support import srv_apps
from support.cli_run import mrtr_all
from support.serve_subprocess import mrtr_serve
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Request,
    TextMessage,
)

import mrtr_core as m

#: A confirmed deploy: a call of the example app that ends with a result (exit 0).
CONFIRMED = 'confirm={"action": "accept", "content": {"confirm": true}}'
LLM = {"role": "assistant", "content": {"type": "text", "text": "cold but bright"}, "model": "t"}


async def answer(key: str, request: m.wire.InputRequest) -> Any:
    if isinstance(request, m.wire.ElicitFormRequest):
        return m.wire.ElicitResult(action="accept", content={"city": "Oslo"})
    if isinstance(request, m.wire.CreateMessageRequest):
        return LLM
    return m.wire.ListRootsResult(roots=[m.wire.Root(uri="file:///work")])


@asynccontextmanager
async def serving(app: Any = None, **options: Any) -> AsyncIterator[str]:
    """A WsServer on a free port: its URL."""
    server = WsServer(app if app is not None else srv_apps.TestApp(), **options)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve)
        yield f"ws://{host}:{port}/mcp"
        nursery.cancel_scope.cancel()


async def test_a_modern_session_with_a_two_round_flow() -> None:
    with trio.fail_after(10):
        async with serving() as url, open_ws_client(url, answer=answer) as client:
            assert (client.era, client.protocol_version) == ("modern", "2026-07-28")
            result = await client.call_tool("trip")
            assert result["content"][0]["text"] == "Trip to Oslo: cold but bright"
            roots = await client.call_tool("roots")
            assert roots["content"][0]["text"] == "file:///work"
            link = client.link
            assert isinstance(link, WsLink) and link.ws.state.name == "OPEN"
        assert link.close_received == (1000, "")  # the server answered our close


async def test_a_legacy_session_is_served_through_the_shim() -> None:
    with trio.fail_after(10):
        async with serving() as url, open_ws_client(url, answer=answer, era="legacy") as client:
            assert client.era == "legacy"
            result = await client.call_tool("trip")
            assert result["content"][0]["text"] == "Trip to Oslo: cold but bright"


async def test_a_timed_out_call_is_cancelled_on_the_wire() -> None:
    app = srv_apps.TestApp()
    with trio.fail_after(10):
        async with serving(app) as url, open_ws_client(url) as client:
            with pytest.raises(CallTimeout):
                await client.call_tool("sleep", timeout=0.3)
            while app.counts["cancelled"] < 1:  # notifications/cancelled stopped the handler
                await trio.sleep(0.01)
            echo = await client.call_tool("echo", {"text": "after"})
            assert echo["content"][0]["text"] == "after"


async def test_the_client_answers_the_servers_pings() -> None:
    with trio.fail_after(10):
        async with (
            serving(ping_interval=0.05, ping_timeout=1.0) as url,
            open_ws_client(url) as client,
        ):
            await trio.sleep(1.5)  # many pings, each answered (or the socket would be closed)
            echo = await client.call_tool("echo", {"text": "alive"})
            assert echo["content"][0]["text"] == "alive"


async def test_refused_upgrades_are_http_transport_errors() -> None:
    with trio.fail_after(10):
        async with serving() as url:
            with pytest.raises(TransportError) as wrong_path:
                async with open_ws_client(url.replace("/mcp", "/nope")):
                    pass
            assert (wrong_path.value.kind, wrong_path.value.status) == ("http", 404)
            with pytest.raises(TransportError) as foreign:
                async with open_ws_client(url, headers={"Origin": "https://evil.example"}):
                    pass
            assert (foreign.value.kind, foreign.value.status) == ("http", 403)
            assert "allowed_origins" in foreign.value.message


async def test_no_server_is_a_connect_error_and_wss_is_out_of_scope() -> None:
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(TransportError) as caught:
        async with open_ws_client(f"ws://127.0.0.1:{port}/mcp"):
            pass
    assert caught.value.kind == "connect"
    with pytest.raises(ValueError, match="wss://"):
        WsLink("wss://example.com/mcp")
    with pytest.raises(ValueError, match="ws://HOST"):
        WsLink("http://example.com/mcp")


async def test_server_shutdown_fails_calls_with_going_away() -> None:
    app = srv_apps.TestApp()
    with trio.fail_after(10):
        server = WsServer(app)
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(server.serve)
            url = f"ws://{host}:{port}/mcp"
            async with open_ws_client(url) as client, trio.open_nursery() as calls:

                async def sleeper() -> None:
                    with pytest.raises(TransportError) as caught:
                        await client.call_tool("sleep")
                    assert "1001 (going away)" in caught.value.message
                    assert caught.value.kind == "disconnect"

                calls.start_soon(sleeper)
                while app.counts["started"] < 1:
                    await trio.sleep(0.01)
                nursery.cancel_scope.cancel()  # the server shuts down


# --- misbehaving servers, written with wsproto here ---

Behaviour = Callable[[trio.SocketStream, WSConnection, dict[str, Any]], Awaitable[None]]


@asynccontextmanager
async def fake_server(behave: Behaviour, *, subprotocol: str | None = "mcp") -> AsyncIterator[str]:
    """A WebSocket server that accepts, answers ``server/discover``, then ``behave``s."""

    async def handle(stream: trio.SocketStream) -> None:
        ws = WSConnection(ConnectionType.SERVER)
        while True:
            ws.receive_data(await stream.receive_some(65536))
            events = list(ws.events())
            if any(isinstance(e, Request) for e in events):
                break
        await stream.send_all(ws.send(AcceptConnection(subprotocol=subprotocol)))
        while True:
            data = await stream.receive_some(65536)
            if not data:
                return
            ws.receive_data(data)
            for event in ws.events():
                if isinstance(event, TextMessage):
                    message = json.loads(event.data)
                    if message.get("method") == "server/discover":
                        result = {
                            "resultType": "complete",
                            "supportedVersions": ["2026-07-28"],
                            "capabilities": {"tools": {}},
                            "serverInfo": {"name": "fake", "version": "1"},
                        }
                        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
                        await stream.send_all(ws.send(TextMessage(data=json.dumps(reply))))
                    else:
                        await behave(stream, ws, message)

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, host="127.0.0.1"), handle, 0
        )
        port = listeners[0].socket.getsockname()[1]
        yield f"ws://127.0.0.1:{port}/mcp"
        nursery.cancel_scope.cancel()


async def test_a_server_that_ignores_the_subprotocol_is_refused() -> None:
    async def nothing(stream: trio.SocketStream, ws: WSConnection, message: Any) -> None:
        raise AssertionError("never reached")

    with trio.fail_after(10):
        async with fake_server(nothing, subprotocol=None) as url:
            with pytest.raises(TransportError) as caught:
                async with open_ws_client(url):
                    pass
            assert caught.value.kind == "http"
            assert "subprotocol none, not 'mcp'" in caught.value.message


async def test_a_binary_answer_closes_with_1003_and_fails_the_call() -> None:
    closes: list[int] = []

    async def binary(stream: trio.SocketStream, ws: WSConnection, message: Any) -> None:
        await stream.send_all(ws.send(BytesMessage(data=b"\x00\x01")))
        data = await stream.receive_some(65536)
        ws.receive_data(data)
        closes.extend(e.code for e in ws.events() if isinstance(e, CloseConnection))

    with trio.fail_after(10):
        async with fake_server(binary) as url, open_ws_client(url) as client:
            with pytest.raises(TransportError) as caught:
                await client.call_tool("anything")
            assert "binary message" in caught.value.message
    assert closes == [1003]


async def test_an_oversized_answer_closes_with_1009() -> None:
    closes: list[int] = []

    async def huge(stream: trio.SocketStream, ws: WSConnection, message: Any) -> None:
        await stream.send_all(ws.send(TextMessage(data="[" + " " * 5000 + "]")))
        data = await stream.receive_some(65536)
        ws.receive_data(data)
        closes.extend(e.code for e in ws.events() if isinstance(e, CloseConnection))

    with trio.fail_after(10):
        async with fake_server(huge) as url, open_ws_client(url, max_message_size=4096) as client:
            with pytest.raises(TransportError) as caught:
                await client.call_tool("anything")
            assert "max_message_size" in caught.value.message
    assert closes == [1009]


# --- mrtr call ws:// against mrtr serve --ws ---


@pytest.mark.subprocess
async def test_mrtr_call_over_websocket_against_mrtr_serve(tmp_path: Path) -> None:
    answers = tmp_path / "answers.json"
    answers.write_text(
        json.dumps(
            {
                "city": {"action": "accept", "content": {"city": "Paris"}},
                "units": {"action": "accept", "content": {"units": "C"}},
            }
        )
    )
    trace = tmp_path / "ws-trace.ndjson"
    serve = ["--ws", "127.0.0.1:0", "--ping-interval", "5"]
    async with mrtr_serve(serve, tmp_path / "serve.log") as target:
        simple, weather, rounds, nowhere = await mrtr_all(
            [
                ["call", "--answer", CONFIRMED, target, "deploy"],
                ["call", "--answers", str(answers), "--trace", str(trace), target, "weather"],
                ["call", "--max-rounds", "1", "--answers", str(answers), target, "weather"],
                ["call", target.replace("/mcp", "/elsewhere"), "weather"],
            ]
        )
        assert simple.returncode == 0, simple.stderr
        assert weather.returncode == 0, weather.stderr
        assert weather.json()["content"][0]["text"] == "Paris: 21 C, sunny"
        assert rounds.returncode == 5, rounds.stderr
        assert nowhere.returncode == 6 and "HTTP 404" in nowhere.stderr, nowhere.stderr
        records = [json.loads(line) for line in trace.read_text().splitlines()]
        retries = [
            r
            for r in records
            if r["dir"] == "send" and "requestState" in r["msg"].get("params", {})
        ]
        assert len(retries) == 2


@pytest.mark.parametrize("length", [2**63, 2**63 - 1, 5000])
async def test_a_frame_announcing_more_than_max_message_size_closes_with_1009_at_once(
    length: int,
) -> None:
    # Issue 22: before, the client waited for the announced bytes (2^63 - 1, 5000) or
    # closed with 1002 (2^63); now the header alone is enough.
    closes: list[int] = []

    async def announce(stream: trio.SocketStream, ws: WSConnection, message: Any) -> None:
        if length < 2**16:
            header = bytes([0x81, 126]) + struct.pack("!H", length)
        else:
            header = bytes([0x81, 127]) + struct.pack("!Q", length)
        await stream.send_all(header + b"[")  # and nothing more of it
        data = await stream.receive_some(65536)
        ws.receive_data(data)
        closes.extend(e.code for e in ws.events() if isinstance(e, CloseConnection))

    with trio.fail_after(10):
        async with (
            fake_server(announce) as url,
            open_ws_client(url, max_message_size=4096) as client,
        ):
            started = trio.current_time()
            with pytest.raises(TransportError) as caught:
                await client.call_tool("anything", timeout=5)
            assert trio.current_time() - started < 0.5
            assert "max_message_size" in caught.value.message
    assert closes == [1009]
