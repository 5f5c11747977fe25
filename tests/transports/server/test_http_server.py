"""The Streamable HTTP server (2026-07-28) on a real socket, driven by an h11 client.

Each test serves ``srv_apps.TestApp`` in-process on 127.0.0.1, port 0, and
speaks raw HTTP/1.1 to it with h11 (not the project's client).
"""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import h11
import pytest
import trio
from mrtr_transports.apps.mcp_app import SUBSCRIPTION_ID, McpApp
from mrtr_transports.host.refusals import SERVER_BUSY
from mrtr_transports.server.app import ServerApp
from mrtr_transports.server.http import HttpServer, serve_http
from support import srv_apps
from support.asgi_hosts import HYPERCORN, hypercorn_serving

import mrtr_core as m

META = {m.wire.META_PROTOCOL_VERSION: "2026-07-28", m.wire.META_CLIENT_CAPABILITIES: {}}
ACCEPT_BOTH = "application/json, text/event-stream"
Header = tuple[str, str]


def rpc(method: str, params: Mapping[str, Any] | None = None, rid: Any = 1, **meta: Any) -> dict:
    """A 2026-07-28 request (``rid=None``: a notification) with ``_meta`` (+ ``meta``)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if rid is not None:
        message["id"] = rid
    message["params"] = {**(params or {}), "_meta": {**META, **meta}}
    return message


def mirrored(message: Mapping[str, Any]) -> list[Header]:
    """The headers a conforming client sends for ``message``."""
    headers = [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", message["method"])]
    params = message.get("params") or {}
    name = params.get("uri" if message["method"] == "resources/read" else "name")
    if message["method"] in ("tools/call", "prompts/get", "resources/read"):
        headers.append(("Mcp-Name", name))
    return headers


def tool_call(name: str, arguments: Mapping[str, Any] | None = None, **meta: Any) -> dict:
    return rpc("tools/call", {"name": name, "arguments": dict(arguments or {})}, **meta)


@attrs.frozen
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        assert self.headers["content-type"] == "application/json", self
        return json.loads(self.body)

    def events(self) -> list[dict[str, Any]]:
        """The messages of an SSE body, in order."""
        assert self.headers["content-type"] == "text/event-stream", self
        decoder = m.http.SseDecoder()
        decoder.feed(self.body)
        decoder.feed_eof()
        found = []
        while (event := decoder.next_event()) is not m.wire.END_OF_STREAM:
            assert isinstance(event, m.http._sse.SseEvent)
            found.append(json.loads(event.data))
        return found


class HttpPeer:
    """One HTTP/1.1 client connection, written with h11."""

    def __init__(self, stream: trio.SocketStream, host: str) -> None:
        self.stream = stream
        self.host = host
        self.h11 = h11.Connection(h11.CLIENT)

    async def send_request(
        self,
        message: Any = None,
        headers: Sequence[Header] | None = None,
        *,
        method: str = "POST",
        target: str = "/mcp",
        accept: str | None = ACCEPT_BOTH,
        body: bytes | None = None,
        extra: Sequence[Header] = (),
    ) -> None:
        if body is None:
            body = json.dumps(message).encode() if message is not None else b""
        if headers is None:
            headers = mirrored(message) if isinstance(message, Mapping) else []
        fields: list[Header] = [("Host", self.host), *headers, *extra]
        if accept is not None:
            fields.append(("Accept", accept))
        if method == "POST":
            fields += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        data = self.h11.send(h11.Request(method=method, target=target, headers=fields))
        if body:
            data += self.h11.send(h11.Data(data=body))
        data += self.h11.send(h11.EndOfMessage())
        await self.stream.send_all(data)

    async def next_event(self) -> Any:
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                self.h11.receive_data(await self.stream.receive_some(65536))
                continue
            return event

    async def head(self) -> h11.Response:
        response = await self.next_event()
        assert isinstance(response, h11.Response), response
        return response

    async def reply(self) -> Reply:
        response = await self.head()
        body = b""
        while not isinstance(event := await self.next_event(), h11.EndOfMessage):
            assert isinstance(event, h11.Data), event
            body += event.data
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
        headers = {k.decode(): v.decode() for k, v in response.headers}
        return Reply(status=response.status_code, headers=headers, body=body)

    async def post(
        self, message: Any = None, headers: Sequence[Header] | None = None, **kw: Any
    ) -> Reply:
        await self.send_request(message, headers, **kw)
        return await self.reply()

    async def closed_by_server(self) -> bool:
        try:
            return await self.stream.receive_some(65536) == b""
        except trio.BrokenResourceError:
            return True


@attrs.define
class Served:
    server: HttpServer
    app: srv_apps.TestApp
    host: str
    port: int

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[HttpPeer]:
        stream = await trio.open_tcp_stream(self.host, self.port)
        async with stream:
            yield HttpPeer(stream, f"{self.host}:{self.port}")

    async def post(
        self, message: Any = None, headers: Sequence[Header] | None = None, **kw: Any
    ) -> Reply:
        async with self.connect() as peer:
            return await peer.post(message, headers, **kw)


#: The endpoint's tests run on ``HttpServer`` ("mrtr": ``McpAsgi`` on the project's host, on
#: trio, as ``mrtr serve --http`` runs it) and on ``McpAsgi`` under hypercorn's trio
#: worker (in this process, real sockets: the test app's counters are readable).
ENDPOINT = pytest.mark.parametrize("kind", ["mrtr", HYPERCORN])


@asynccontextmanager
async def serving(app: Any = None, *, kind: str = "mrtr", **options: Any) -> AsyncIterator[Served]:
    app = srv_apps.TestApp() if app is None else app
    keepalive = options.pop("keepalive_interval", 0.05)
    if kind == HYPERCORN:
        async with hypercorn_serving(app, keepalive_interval=keepalive, **options) as found:
            endpoint, host, port = found
            yield Served(endpoint, app, host, port)  # type: ignore[arg-type]
        return
    server = HttpServer(app, keepalive_interval=keepalive, **options)
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(server.serve, "127.0.0.1", 0)
        yield Served(server, app, host, port)
        await server.aclose(grace=0.5)


@ENDPOINT
async def test_a_request_gets_a_json_response(kind: str) -> None:
    with trio.fail_after(5):
        async with serving(kind=kind) as served:
            reply = await served.post(tool_call("echo", {"text": "hello"}))
            assert reply.status == 200
            body = reply.json()
            assert body["id"] == 1
            assert body["result"]["content"] == [{"type": "text", "text": "hello"}]
            assert body["result"]["_meta"][m.wire.META_SERVER_INFO]["name"] == "srv-test"
            discover = (await served.post(rpc("server/discover"))).json()["result"]
            assert discover["supportedVersions"] == ["2026-07-28"]
            assert (discover["ttlMs"], discover["cacheScope"]) == (0, "private")


@ENDPOINT
async def test_progress_turns_the_response_into_an_sse_stream(kind: str) -> None:
    with trio.fail_after(5):
        async with serving(kind=kind) as served:
            message = tool_call("progress", progressToken="p1", **{m.wire.META_LOG_LEVEL: "info"})
            reply = await served.post(message)
            assert reply.status == 200
            assert reply.headers["cache-control"] == "no-cache"
            assert reply.headers["x-accel-buffering"] == "no"
            assert "content-encoding" not in reply.headers
            events = reply.events()
            assert [e.get("method") for e in events] == [
                "notifications/progress",
                "notifications/progress",
                "notifications/progress",
                "notifications/message",
                None,
            ]
            assert [e["params"]["progress"] for e in events[:3]] == [1, 2, 3]
            assert events[0]["params"]["progressToken"] == "p1"
            assert events[3]["params"]["level"] == "info"  # the debug line stayed out
            assert events[4]["result"]["content"][0]["text"] == "progressed"

            # No progress token and no log level: nothing streams, so plain JSON.
            assert (await served.post(tool_call("progress"))).json()["result"]["content"]


@ENDPOINT
async def test_keep_alive_comments_while_a_stream_is_quiet(kind: str) -> None:
    with trio.fail_after(5):
        async with serving(keepalive_interval=0.02, kind=kind) as served:
            reply = await served.post(tool_call("trickle", {"seconds": 0.2}, progressToken=7))
            assert m.http._sse.encode_sse_comment() in reply.body
            events = reply.events()  # comments are not events
            assert events[0]["method"] == "notifications/progress"
            assert events[1]["result"]["content"][0]["text"] == "trickled"
            assert len(events) == 2


@ENDPOINT
async def test_what_the_client_accepts_decides_the_shape(kind: str) -> None:
    with trio.fail_after(5):
        async with serving(kind=kind) as served:
            streaming = tool_call("progress", progressToken="p")
            json_only = await served.post(streaming, accept="application/json")
            assert json_only.json()["result"]["content"][0]["text"] == "progressed"
            stream_only = await served.post(
                tool_call("echo", {"text": "x"}), accept="text/event-stream"
            )
            assert [e["result"]["content"][0]["text"] for e in stream_only.events()] == ["x"]
            wildcard = await served.post(tool_call("echo", {"text": "y"}), accept="*/*")
            assert wildcard.json()["result"]["content"][0]["text"] == "y"
            refused = await served.post(tool_call("echo"), accept="text/html")
            assert refused.status == 406 and "Accept" in refused.json()["error"]["message"]
            refused = await served.post(tool_call("echo"), accept="application/json;q=0")
            assert refused.status == 406


@ENDPOINT
async def test_notification_gets_202_and_no_body(kind: str) -> None:
    with trio.fail_after(5):
        async with serving(kind=kind) as served:
            note = rpc("notifications/cancelled", {"requestId": 5}, rid=None)
            reply = await served.post(note)
            assert (reply.status, reply.body) == (202, b"")


@ENDPOINT
async def test_get_and_delete_need_a_session_and_nothing_else_is_allowed(kind: str) -> None:
    with trio.fail_after(5):
        async with serving(kind=kind) as served, served.connect() as peer:
            for method in ("GET", "DELETE", "PUT"):  # (no Mcp-Session-Id)
                reply = await peer.post(method=method, accept="text/event-stream")
                assert reply.status == 405 and reply.headers["allow"] == "GET, POST, DELETE"
            # The connection was kept alive through the refusals.
            assert (await peer.post(tool_call("echo"))).status == 200
            missing = await served.post(tool_call("echo"), target="/other")
            assert missing.status == 404


@ENDPOINT
async def test_bodies_and_headers_are_bounded(kind: str) -> None:
    with trio.fail_after(5):
        async with serving(max_body_size=1000, max_header_size=4096, kind=kind) as served:
            big = tool_call("echo", {"text": "x" * 2000})
            assert (await served.post(big)).status == 413
            async with served.connect() as peer:  # chunked, so the size shows only as it comes
                body = json.dumps(big).encode()
                fields = [("Host", peer.host), ("Accept", ACCEPT_BOTH), *mirrored(big)]
                fields.append(("Transfer-Encoding", "chunked"))
                data = peer.h11.send(h11.Request(method="POST", target="/mcp", headers=fields))
                data += peer.h11.send(h11.Data(data=body)) + peer.h11.send(h11.EndOfMessage())
                await peer.stream.send_all(data)
                assert (await peer.reply()).status == 413
            huge_header = [("X-Filler", "y" * 8000)]
            reply = await served.post(tool_call("echo"), extra=huge_header)
            assert reply.status == 431
            assert (await served.post(tool_call("echo", {"text": "fits"}))).status == 200


@ENDPOINT
async def test_origin_and_host_are_checked(kind: str) -> None:
    with trio.fail_after(5):
        async with serving(kind=kind) as served:
            message = tool_call("echo", {"text": "hi"})
            evil = await served.post(message, extra=[("Origin", "http://evil.example.com")])
            assert evil.status == 403
            error = evil.json()["error"]
            assert "id" not in evil.json()
            assert "allowed_origins" in error["message"] and "--allow-origin" in error["message"]
            for origin in ("http://localhost:5173", "https://127.0.0.1", "http://[::1]:80"):
                assert (await served.post(message, extra=[("Origin", origin)])).status == 200
            assert (await served.post(message, extra=[("Origin", "null")])).status == 403
            async with served.connect() as peer:
                peer.host = "evil.example.com:80"  # a DNS-rebound name
                rebound = await peer.post(message)
                assert (
                    rebound.status == 403 and "allowed_hosts" in rebound.json()["error"]["message"]
                )
            # X-Forwarded-Host from an untrusted peer is ignored.
            forwarded = [("X-Forwarded-Host", "evil.example.com")]
            assert (await served.post(message, extra=forwarded)).status == 200

        options = {
            "allowed_origins": ["https://app.example.com"],
            "allowed_hosts": ["mcp.example.com"],
            "trusted_proxies": ["127.0.0.0/8"],
        }
        async with serving(**options, kind=kind) as served:
            app_origin = [("Origin", "https://app.example.com")]
            assert (await served.post(message, extra=app_origin)).status == 200
            other = [("Origin", "https://app.example.com:8443")]
            assert (await served.post(message, extra=other)).status == 403
            assert (await served.post(message, extra=forwarded)).status == 403  # a trusted proxy
            ok = [("X-Forwarded-Host", "mcp.example.com")]
            assert (await served.post(message, extra=ok)).status == 200


def mismatch(reply: Reply) -> str:
    assert reply.status == 400, reply
    body = reply.json()
    assert body["error"]["code"] == m.ErrorCode.HEADER_MISMATCH and body["id"] == 1, body
    message: str = body["error"]["message"]
    return message


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


@ENDPOINT
async def test_standard_headers_must_match_the_body(kind: str) -> None:
    with trio.fail_after(5):
        async with serving(kind=kind) as served:
            call = tool_call("echo", {"text": "hi"})
            good = mirrored(call)
            assert (await served.post(call, good)).status == 200
            version, method, name = good
            assert "Mcp-Method" in mismatch(await served.post(call, [version, name]))
            wrong_method = ("Mcp-Method", "tools/list")
            assert "Mcp-Method" in mismatch(await served.post(call, [version, wrong_method, name]))
            shouting = ("Mcp-Method", "TOOLS/CALL")  # values are case-sensitive
            assert "Mcp-Method" in mismatch(await served.post(call, [version, shouting, name]))
            assert "MCP-Protocol-Version" in mismatch(await served.post(call, [method, name]))
            old = ("MCP-Protocol-Version", "2025-11-25")
            assert "MCP-Protocol-Version" in mismatch(await served.post(call, [old, method, name]))
            assert "Mcp-Name" in mismatch(await served.post(call, [version, method]))
            other = ("Mcp-Name", "other")
            assert "Mcp-Name" in mismatch(await served.post(call, [version, method, other]))
            # Header names are case-insensitive; whitespace around values is not the value
            # (h11 will not write such a value, so these bytes are written by hand).
            async with served.connect() as peer:
                body = json.dumps(call).encode()
                head = (
                    f"POST /mcp HTTP/1.1\r\nHost: {peer.host}\r\nAccept: {ACCEPT_BOTH}\r\n"
                    "mcp-protocol-version: 2026-07-28\r\nMCP-METHOD: tools/call\r\n"
                    f"mcp-name:   echo  \r\nContent-Length: {len(body)}\r\n\r\n"
                )
                await peer.stream.send_all(head.encode() + body)
                peer.h11.send(h11.Request(method="POST", target="/", headers=[("Host", "x")]))
                peer.h11.send(h11.EndOfMessage())  # (h11's own state follows the bytes sent)
                assert (await peer.reply()).status == 200
            encoded = ("Mcp-Name", b64("echo"))
            assert (await served.post(call, [version, method, encoded])).status == 200
            garbled = ("Mcp-Name", "=?base64?ZWNo!!!?=")
            assert "malformed" in mismatch(await served.post(call, [version, method, garbled]))

            read = rpc("resources/read", {"uri": "test://doc"})
            assert (await served.post(read)).status == 200
            wrong_uri = [*mirrored(read)[:2], ("Mcp-Name", "test://other")]
            assert "Mcp-Name" in mismatch(await served.post(read, wrong_uri))
            prompt = rpc("prompts/get", {"name": "hello"})
            assert (await served.post(prompt)).json()["result"]["messages"]


@ENDPOINT
async def test_mirrored_tool_arguments_must_match(kind: str) -> None:
    with trio.fail_after(5):
        async with serving(kind=kind) as served:
            arguments = {"region": "Zürich", "count": 3, "flag": True, "opts": {"tenant": "t-1"}}
            call = tool_call("headers", arguments)
            params = [
                ("Mcp-Param-Region", b64("Zürich")),
                ("Mcp-Param-Count", "3.0"),  # compared as a number
                ("mcp-param-flag", "true"),
                ("Mcp-Param-Tenant", "t-1"),
            ]
            ok = await served.post(call, [*mirrored(call), *params])
            assert ok.status == 200, ok
            for index, bad, words in [
                (0, ("Mcp-Param-Region", "Zurich"), "Mcp-Param-Region"),
                (0, ("Mcp-Param-Region", "=?base64?WnVyaWNo?="), "Mcp-Param-Region"),
                (0, ("Mcp-Param-Region", "=?base64?SGVsbG8?="), "malformed"),  # bad padding
                (1, ("Mcp-Param-Count", "4"), "Mcp-Param-Count"),
                (2, ("Mcp-Param-Flag", "True"), "Mcp-Param-Flag"),
                (3, ("Mcp-Param-Tenant", "t-2"), "Mcp-Param-Tenant"),
            ]:
                headers = [*mirrored(call), *params[:index], bad, *params[index + 1 :]]
                assert words in mismatch(await served.post(call, headers))
            missing = [*mirrored(call), *params[1:]]
            assert "missing" in mismatch(await served.post(call, missing))
            # An argument that is absent: no header expected, and none may claim one.
            partial = tool_call("headers", {"count": 3})
            assert (await served.post(partial, [*mirrored(partial), params[1]])).status == 200
            claims = [*mirrored(partial), params[1], ("Mcp-Param-Region", "x")]
            assert "no 'region'" in mismatch(await served.post(partial, claims))
            # A literal that merely looks like the sentinel's start is a literal.
            literal = tool_call("headers", {"region": "=?base64?abc"})
            sent = [*mirrored(literal), ("Mcp-Param-Region", "=?base64?abc")]
            assert (await served.post(literal, sent)).status == 200


@ENDPOINT
async def test_protocol_errors_get_their_http_status(kind: str) -> None:
    with trio.fail_after(5):
        async with serving(kind=kind) as served:
            unknown = await served.post(rpc("nope/nothing"))
            assert (
                unknown.status == 404
                and unknown.json()["error"]["code"] == m.ErrorCode.METHOD_NOT_FOUND
            )
            for removed in ("ping", "initialize"):
                reply = await served.post(rpc(removed))
                assert reply.status == 404 and reply.json()["id"] == 1
            bare_ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}  # no _meta at all
            reply = await served.post(bare_ping, [("Mcp-Method", "ping")])
            assert (
                reply.status == 404
                and reply.json()["error"]["code"] == m.ErrorCode.METHOD_NOT_FOUND
            )
            no_meta = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}
            headers = [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/list")]
            reply = await served.post(no_meta, headers)  # a 2025-era request, or a forgetful one
            assert reply.status == 400
            assert (
                reply.json()["error"]["code"] == m.ErrorCode.INVALID_PARAMS
                and reply.json()["id"] == 7
            )
            assert reply.json()["error"]["data"] == {"supported": ["2026-07-28"]}
            future = rpc("server/discover", **{m.wire.META_PROTOCOL_VERSION: "2099-01-01"})
            headers = [("MCP-Protocol-Version", "2099-01-01"), ("Mcp-Method", "server/discover")]
            reply = await served.post(future, headers)
            assert reply.status == 400
            assert reply.json()["error"]["code"] == m.ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
            needs = await served.post(tool_call("ask_sampling"))
            assert needs.status == 400
            assert needs.json()["error"]["code"] == m.ErrorCode.MISSING_CLIENT_CAPABILITY
            crash = await served.post(tool_call("crash"))
            assert crash.status == 500 and "secret" not in crash.body.decode()
            for body in (b"{not json", b"   "):
                reply = await served.post(body=body, headers=[])
                assert (
                    reply.status == 400 and reply.json()["error"]["code"] == m.ErrorCode.PARSE_ERROR
                )
            async with served.connect() as peer:  # a POST with no body at all
                fields = [("Host", peer.host), ("Accept", ACCEPT_BOTH)]
                data = peer.h11.send(h11.Request(method="POST", target="/mcp", headers=fields))
                await peer.stream.send_all(data + peer.h11.send(h11.EndOfMessage()))
                reply = await peer.reply()
                assert (
                    reply.status == 400 and reply.json()["error"]["code"] == m.ErrorCode.PARSE_ERROR
                )
            response = {"jsonrpc": "2.0", "id": 3, "result": {}}  # clients send no responses
            assert (await served.post(response, [])).status == 400


@ENDPOINT
async def test_two_posts_on_one_kept_alive_connection(kind: str) -> None:
    with trio.fail_after(5):
        async with serving(kind=kind) as served, served.connect() as peer:
            first = await peer.post(tool_call("echo", {"text": "one"}))
            second = await peer.post(tool_call("progress", progressToken=2))  # SSE this time
            third = await peer.post(tool_call("echo", {"text": "three"}))
            assert first.json()["result"]["content"][0]["text"] == "one"
            assert second.events()[-1]["result"]["content"][0]["text"] == "progressed"
            assert third.json()["result"]["content"][0]["text"] == "three"


@ENDPOINT
async def test_ids_of_different_clients_do_not_collide(kind: str) -> None:
    with trio.fail_after(5):
        async with serving(kind=kind) as served:
            replies: list[Reply] = []

            async def call() -> None:  # every client uses id 1, at the same time
                replies.append(await served.post(tool_call("slow", {"seconds": 0.05}) | {"id": 1}))

            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(call)
            assert [r.json()["result"]["content"][0]["text"] for r in replies] == ["slow done"] * 3


@ENDPOINT
async def test_closing_the_stream_cancels_the_handler(kind: str) -> None:
    with trio.fail_after(5):
        async with serving(kind=kind) as served:
            async with served.connect() as peer:  # an SSE stream, closed after its first event
                await peer.send_request(tool_call("trickle", progressToken="t"))
                assert (await peer.head()).status_code == 200
                assert isinstance(await peer.next_event(), h11.Data)
            while served.app.counts["cancelled"] < 1:
                await trio.sleep(0.01)
            async with served.connect() as peer:  # a JSON response still pending
                await peer.send_request(tool_call("sleep"))
                while served.app.counts["started"] < 2:
                    await trio.sleep(0.01)
            while served.app.counts["cancelled"] < 2:
                await trio.sleep(0.01)


async def test_graceful_shutdown_finishes_running_requests() -> None:
    with trio.fail_after(5):
        app = srv_apps.TestApp()
        server = HttpServer(app)
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(server.serve, "127.0.0.1", 0)
            slow = HttpPeer(await trio.open_tcp_stream(host, port), f"{host}:{port}")
            idle = HttpPeer(await trio.open_tcp_stream(host, port), f"{host}:{port}")
            assert (await idle.post(tool_call("echo"))).status == 200
            await slow.send_request(tool_call("slow", {"seconds": 0.2}))
            while app.counts["started"] < 1:  # the slow handler is running now
                await trio.sleep(0.01)
            await server.aclose(grace=2.0)
            # The running request was answered, then its connection closed.
            reply = await slow.reply()
            assert reply.json()["result"]["content"][0]["text"] == "slow done"
            assert reply.headers["connection"] == "close"
            assert await idle.closed_by_server()
            with pytest.raises(OSError):
                await trio.open_tcp_stream(host, port)


async def test_shutdown_ends_a_listen_stream_with_its_result() -> None:
    with trio.fail_after(5):
        app = McpApp("listen-test", "1.0")
        app.add_tool(lambda ctx: "ok", name="noop")  # so tools/list_changed can be agreed to
        server = HttpServer(app)
        async with trio.open_nursery() as nursery:
            host, port = await nursery.start(server.serve, "127.0.0.1", 0)
            peer = HttpPeer(await trio.open_tcp_stream(host, port), f"{host}:{port}")
            listen = {"notifications": {"toolsListChanged": True}}
            await peer.send_request(rpc("subscriptions/listen", listen, rid=9))
            assert (await peer.head()).status_code == 200  # streaming: acknowledged
            assert app.subscription_count == 1
            # Not cancelled after the grace: the app ends the stream with its result.
            await server.aclose(grace=1.0)
            body = b""
            while not isinstance(event := await peer.next_event(), h11.EndOfMessage):
                assert isinstance(event, h11.Data), event
                body += event.data
        events = Reply(200, {"content-type": "text/event-stream"}, body).events()
        assert events[-1]["id"] == 9
        assert events[-1]["result"]["_meta"][SUBSCRIPTION_ID] == 9
        assert app.subscription_count == 0


async def test_shutdown_cancels_what_outlives_the_grace() -> None:
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            app = srv_apps.TestApp()
            host, port = await nursery.start(
                lambda task_status: serve_http(app, task_status=task_status)
            )
            assert host == "127.0.0.1"
            server_scope = nursery.cancel_scope
            peer = HttpPeer(await trio.open_tcp_stream(host, port), f"{host}:{port}")
            await peer.send_request(tool_call("sleep"))
            while app.counts["started"] < 1:
                await trio.sleep(0.01)
            server_scope.cancel()
        assert app.counts["cancelled"] == 1
        assert await peer.closed_by_server()


async def test_connections_are_bounded() -> None:
    with trio.fail_after(5):
        async with serving(max_connections=1) as served, served.connect() as first:
            # A request in flight keeps its slot: the newcomer is refused, clearly.
            await first.send_request(tool_call("slow", {"seconds": 0.5}))
            while served.app.counts["started"] < 1:
                await trio.sleep(0.01)
            async with served.connect() as second:
                await second.send_request(tool_call("echo"))
                refused = await second.reply()
                assert refused.status == 503 and refused.headers["retry-after"] == "1"
                assert refused.json()["error"]["code"] == SERVER_BUSY
            assert (await first.reply()).status == 200
            # Idle between requests, it gives the slot up to a newcomer.
            async with served.connect() as third:
                assert (await third.post(tool_call("echo"))).status == 200
            assert await first.closed_by_server()


def test_annotations_are_read_along_properties_chains() -> None:
    app = srv_apps.TestApp()
    headers = app.tool_header_params("headers")
    assert headers is not None
    assert list(headers.items()) == [
        ("Region", ("region",)),
        ("Count", ("count",)),
        ("Flag", ("flag",)),
        ("Tenant", ("opts", "tenant")),
    ]
    assert app.tool_header_params("echo") == {}
    assert app.tool_header_params("missing") is None


@ENDPOINT
async def test_annotations_may_be_given_instead_of_read(kind: str) -> None:
    with trio.fail_after(5):
        fixed = {"echo": {"Text": ("text",)}}
        async with serving(param_headers=fixed, kind=kind) as served:
            call = tool_call("echo", {"text": "hi"})
            assert "Mcp-Param-Text" in mismatch(await served.post(call))
            sent = [*mirrored(call), ("Mcp-Param-Text", "hi")]
            assert (await served.post(call, sent)).status == 200
            # The app's own annotations are not read when a mapping is given.
            region = tool_call("headers", {"region": "eu"})
            assert (await served.post(region)).status == 200


class AskedApp(srv_apps.TestApp):
    """Records what the server asks of it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []
        self.methods: list[str] = []

    def tool_header_params(self, name: str) -> Mapping[str, tuple[str, ...]] | None:
        self.asked.append(name)
        return super().tool_header_params(name)

    async def handle(self, request: m.Request, info: m.server.RequestInfo, outlet: Any) -> Any:
        self.methods.append(request.method)
        return await super().handle(request, info, outlet)


class ShapeOnlyApp(srv_apps.TestApp):
    """An app written before ``tool_header_params``: it matches ServerApp by shape only."""

    tool_header_params = None  # type: ignore[assignment]


class SubclassApp(ServerApp):
    """An app that subclasses ServerApp and so inherits its default: no header params."""

    info: Mapping[str, Any] = {"name": "sub", "version": "1"}
    capabilities: Mapping[str, Any] = {"tools": {}}
    instructions: str | None = None

    async def handle(self, request: m.Request, info: m.server.RequestInfo, outlet: Any) -> Any:
        return {"content": [{"type": "text", "text": "sub ok"}]}


@ENDPOINT
async def test_the_app_says_which_arguments_are_mirrored(kind: str) -> None:
    with trio.fail_after(5):
        app = AskedApp()
        async with serving(app, kind=kind) as served:
            call = tool_call("headers", {"region": "eu"})
            assert "Mcp-Param-Region" in mismatch(await served.post(call))
            sent = [*mirrored(call), ("Mcp-Param-Region", "eu")]
            assert (await served.post(call, sent)).status == 200
            assert (await served.post(tool_call("echo", {"text": "x"}))).status == 200
            assert (await served.post(tool_call("nope"))).status == 400  # the app's -32602
            assert (await served.post(rpc("tools/list"))).status == 200
        # Asked once per tools/call, for the called tool; never a tools/list of its own.
        assert app.asked == ["headers", "headers", "echo", "nope"]
        assert app.methods == ["tools/call", "tools/call", "tools/call", "tools/list"]


@ENDPOINT
async def test_an_app_without_header_params_has_none(kind: str) -> None:
    with trio.fail_after(5):
        assert ShapeOnlyApp().tool_header_params is None
        async with serving(ShapeOnlyApp(), kind=kind) as served:
            call = tool_call("headers", {"region": "eu"})
            assert (await served.post(call)).status == 200
            claims = [*mirrored(call), ("Mcp-Param-Region", "elsewhere")]
            assert (await served.post(call, claims)).status == 200
        sub = SubclassApp()
        assert sub.tool_header_params("anything") is None
        async with serving(sub, kind=kind) as served:
            reply = await served.post(tool_call("anything", {"region": "eu"}))
            assert reply.status == 200 and "sub ok" in reply.body.decode()


@ENDPOINT
async def test_repeated_origin_content_type_and_host_are_refused(kind: str) -> None:
    with trio.fail_after(5):
        async with serving(kind=kind) as served:
            message = tool_call("echo", {"text": "hi"})
            # Only the first Origin was checked: an allowed one first let any other through.
            two = [("Origin", "http://localhost"), ("Origin", "http://evil.example")]
            refused = await served.post(message, extra=two)
            assert refused.status == 403, refused
            error = refused.json()["error"]
            assert "more than one Origin header" in error["message"] and "evil" in error["message"]
            same = [("Origin", "http://localhost"), ("Origin", "http://localhost")]
            assert (await served.post(message, extra=same)).status == 403
            assert (await served.post(message, extra=same[:1])).status == 200
            # Only the first Content-Type was checked.
            types = [("Content-Type", "text/plain")]  # after the peer's application/json
            reply = await served.post(message, extra=types)
            assert reply.status == 400, reply
            assert "more than one Content-Type header" in reply.json()["error"]["message"]
            # Two Host headers: h11 refuses the request (bytes written by hand, as h11's
            # client will not send them).
            async with served.connect() as peer:
                body = json.dumps(message).encode()
                head = (
                    f"POST /mcp HTTP/1.1\r\nHost: {peer.host}\r\nHost: evil.example.com\r\n"
                    f"Accept: {ACCEPT_BOTH}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\n\r\n"
                )
                await peer.stream.send_all(head.encode() + body)
                peer.h11.send(h11.Request(method="POST", target="/", headers=[("Host", "x")]))
                peer.h11.send(h11.EndOfMessage())
                reply = await peer.reply()
                assert reply.status == 400, reply
                if kind == "mrtr":  # (under an ASGI server its parser says so, in its words)
                    assert b"multiple Host" in reply.body, reply


async def test_waiting_handlers_and_a_pipelined_request_on_one_connection() -> None:
    # While a handler waits, the connection's watcher reads for it (a close cancels it, a
    # pipelined request is kept); it must be done reading before the next request is read.
    with trio.fail_after(10):
        async with serving() as served, served.connect() as peer:
            for round_ in range(3):
                await peer.send_request(tool_call("slow", {"seconds": 0.05}))
                # The next request right behind it (h11 pipelines no requests: a second
                # h11 connection writes it, the peer's is told of it once the first is read).
                early = h11.Connection(h11.CLIENT)
                message = tool_call("echo", {"text": f"next {round_}"})
                body = json.dumps(message).encode()
                fields = [("Host", peer.host), *mirrored(message), ("Accept", ACCEPT_BOTH)]
                fields += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
                data = early.send(h11.Request(method="POST", target="/mcp", headers=fields))
                data += early.send(h11.Data(data=body)) + early.send(h11.EndOfMessage())
                await peer.stream.send_all(data)
                first = await peer.reply()
                peer.h11.send(h11.Request(method="POST", target="/", headers=[("Host", "x")]))
                peer.h11.send(h11.EndOfMessage())
                second = await peer.reply()
                assert first.json()["result"]["content"][0]["text"] == "slow done"
                assert second.json()["result"]["content"][0]["text"] == f"next {round_}"
            await peer.send_request(tool_call("sleep"))  # then the client goes away
            while served.app.counts["started"] < 1:
                await trio.sleep(0.01)
        while served.app.counts["cancelled"] < 1:
            await trio.sleep(0.01)


@ENDPOINT
async def test_a_response_larger_than_the_socket_takes_at_once_reaches_a_slow_reader(
    kind: str,
) -> None:
    # The write the socket takes only in part goes on in the shielded, deadlined path.
    text = "x" * (3 * 1024 * 1024)
    with trio.fail_after(20):
        async with serving(kind=kind) as served, served.connect() as peer:
            await peer.send_request(tool_call("echo", {"text": text}))
            await trio.sleep(0.3)  # the server's write fills the socket buffers meanwhile
            reply = await peer.reply()
            assert reply.json()["result"]["content"][0]["text"] == text
            after = await peer.post(tool_call("echo", {"text": "after"}))
            assert after.json()["result"]["content"][0]["text"] == "after"


async def test_each_request_leaves_an_access_line_at_info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mrtr.server.access")  # before the server is made
    with trio.fail_after(10):
        async with serving(max_body_size=1000) as served:
            assert (await served.post(tool_call("echo", {"text": "hi"}))).status == 200
            assert (await served.post(rpc("server/discover"))).status == 200
            assert (await served.post(tool_call("echo", {"text": "x" * 2000}))).status == 413
            async with served.connect() as peer:
                await peer.send_request(None, method="GET", target="/healthz?probe=1")
                assert (await peer.reply()).status == 200
    lines = [r.getMessage() for r in caplog.records if r.name == "mrtr.server.access"]
    line = re.compile(r'^127\.0\.0\.1 "(\w+) (\S+)" (\d+|-) [\d.]+ms (\d+)B(?: (\S+))?(?: (\S+))?$')
    seen = [line.match(text) for text in lines]
    assert all(seen), lines
    fields = [found.groups() for found in seen if found]
    assert [(f[0], f[1], f[2], f[4], f[5]) for f in fields] == [
        ("POST", "/mcp", "200", "tools/call", "echo"),
        ("POST", "/mcp", "200", "server/discover", None),
        ("POST", "/mcp", "413", None, None),  # refused before the body was read
        ("GET", "/healthz", "200", None, None),  # the path without its query
    ]
    assert all(int(f[3]) > 0 for f in fields)  # every answer has a body: its bytes
