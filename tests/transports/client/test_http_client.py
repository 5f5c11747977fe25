"""The Streamable HTTP client against real sockets on 127.0.0.1.

The server is tests/peer_http_server.py: a scriptable trio + h11 server that
records every request (headers and body) and answers what each test says:
JSON, SSE (with progress first, broken mid-way, or held open), errors.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import trio
from mrtr_transports.client import http_streams
from mrtr_transports.client.client import Client, TraceRecord
from mrtr_transports.client.errors import CallError, CallTimeout, ClientError, TransportError
from mrtr_transports.client.http import open_http_client
from support.peer_http_server import (
    DISCOVER,
    PeerHttpServer,
    Reply,
    Seen,
    error,
    json_reply,
    result,
    sse_reply,
)

import mrtr_core as m

E = TypeVar("E", bound=BaseException)

ROOTS = {"method": "roots/list"}
TOOLS = [
    {
        "name": "test_custom_headers",
        "inputSchema": {
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "priority": {"type": "integer", "x-mcp-header": "Priority"},
                "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
                "debug": {"type": "boolean", "x-mcp-header": "Debug"},
                "empty_val": {"type": "string", "x-mcp-header": "EmptyVal"},
                "method_val": {"type": "string", "x-mcp-header": "Method"},
                "float_val": {"type": "number"},
                "non_ascii_val": {"type": "string", "x-mcp-header": "NonAscii"},
                "whitespace_val": {"type": "string", "x-mcp-header": "Whitespace"},
                "internal_space_val": {"type": "string", "x-mcp-header": "InternalSpace"},
                "control_char_val": {"type": "string", "x-mcp-header": "ControlChar"},
                "tab_val": {"type": "string", "x-mcp-header": "Tab"},
                "nested": {
                    "type": "object",
                    "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}},
                },
                "query": {"type": "string"},
            },
        },
    },
    {
        "name": "invalid_number_header",
        "inputSchema": {
            "type": "object",
            "properties": {"score": {"type": "number", "x-mcp-header": "Score"}},
        },
    },
    {"name": "plain", "inputSchema": {"type": "object"}},
]


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def b64(value: str) -> str:
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


ToolScript = Callable[[Seen, int], Awaitable[Reply]]


def mcp_handler(tools_call: ToolScript, **overrides: Callable[[Seen], Reply]) -> Any:
    """A modern server: discover and tools/list answered, tools/call by ``tools_call``
    (which also gets how many tools/call requests came before)."""
    calls = 0

    async def handler(seen: Seen) -> Reply:
        nonlocal calls
        method = seen.rpc_method
        if method in overrides:
            return overrides[method](seen)
        if method == "server/discover":
            return json_reply(result(seen, DISCOVER))
        if method == "tools/list":
            return json_reply(result(seen, {"tools": TOOLS}))
        if method == "tools/call":
            calls += 1
            return await tools_call(seen, calls - 1)
        return json_reply(error(seen, m.ErrorCode.METHOD_NOT_FOUND, "Method not found"), 404)

    return handler


async def run(
    handler: Any,
    body: Callable[[Client, PeerHttpServer], Awaitable[None]],
    **options: Any,
) -> PeerHttpServer:
    server = PeerHttpServer(handler)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            url = await nursery.start(server.run)
            async with open_http_client(url, **options) as client:
                await body(client, server)
            nursery.cancel_scope.cancel()
    return server


async def roots_answer(key: str, request: m.wire.InputRequest) -> Any:
    return m.wire.ListRootsResult(roots=[m.wire.Root(uri="file:///r")])


async def test_every_leg_carries_the_required_headers_and_connections_are_reused() -> None:
    async def tools_call(seen: Seen, count: int) -> Reply:
        if count == 0:
            return json_reply(
                result(
                    seen,
                    {
                        "resultType": "input_required",
                        "inputRequests": {"r": ROOTS},
                        "requestState": "s",
                    },
                )
            )
        return json_reply(result(seen, text("done")))

    async def body(client: Client, server: PeerHttpServer) -> None:
        args = {"region": "us-west1", "priority": 42, "query": "SELECT 1"}
        assert (await client.call_tool("test_custom_headers", args))["content"][0]["text"] == "done"

    server = await run(mcp_handler(tools_call), body, answer=roots_answer)
    methods = [seen.rpc_method for seen in server.seen]
    assert methods == ["server/discover", "tools/list", "tools/call", "tools/call"]
    for seen in server.seen:
        headers = seen.headers
        assert headers["accept"] == "application/json, text/event-stream"
        assert headers["content-type"] == "application/json"
        assert headers["mcp-protocol-version"] == "2026-07-28"
        assert headers["mcp-method"] == seen.rpc_method
        assert headers["host"] == f"127.0.0.1:{server.port}"
    for leg in server.seen[2:]:  # the original and the retry alike
        assert leg.headers["mcp-name"] == "test_custom_headers"
        assert leg.headers["mcp-param-region"] == "us-west1"
        assert leg.headers["mcp-param-priority"] == "42"
        assert "mcp-param-query" not in leg.headers
    assert server.seen[3].params["requestState"] == "s"
    assert server.connections == 1  # one keep-alive connection for all four POSTs


async def test_annotated_arguments_are_mirrored_with_the_value_encoding() -> None:
    async def tools_call(seen: Seen, count: int) -> Reply:
        return json_reply(result(seen, text("ok")))

    args = {
        "region": "us-west1",
        "priority": 42,
        "verbose": False,
        "debug": True,
        "empty_val": "",
        "method_val": "test-method",
        "float_val": 3.14159,
        "non_ascii_val": "Hello, 世界",
        "whitespace_val": " padded ",
        "internal_space_val": "us west 1",
        "control_char_val": "line1\nline2",
        "tab_val": "\tindented",
        "nested": {"zone": "b"},
        "query": "SELECT * FROM users",
    }

    async def body(client: Client, server: PeerHttpServer) -> None:
        await client.call_tool("test_custom_headers", args)
        await client.call_tool("test_custom_headers", {"region": "x", "verbose": None})

    server = await run(mcp_handler(tools_call), body)
    first, second = (seen.headers for seen in server.seen if seen.rpc_method == "tools/call")
    mirrored = {k[len("mcp-param-") :]: v for k, v in first.items() if k.startswith("mcp-param-")}
    assert mirrored == {
        "region": "us-west1",
        "priority": "42",
        "verbose": "false",
        "debug": "true",
        "emptyval": "",
        "method": "test-method",
        "nonascii": b64("Hello, 世界"),
        "whitespace": b64(" padded "),
        "internalspace": "us west 1",
        "controlchar": b64("line1\nline2"),
        "tab": b64("\tindented"),
        "zone": "b",
    }
    assert first["mcp-method"] == "tools/call"  # not overwritten by Mcp-Param-Method
    assert "mcp-param-verbose" not in second  # null: omitted


async def test_tools_with_invalid_annotations_are_dropped_and_names_are_encoded() -> None:
    async def tools_call(seen: Seen, count: int) -> Reply:
        return json_reply(result(seen, text("ok")))

    async def body(client: Client, server: PeerHttpServer) -> None:
        names = [tool["name"] for tool in await client.list_tools()]
        assert names == ["test_custom_headers", "plain"]
        await client.call_tool("café")
        await client.call("prompts/get", {"name": "p"})
        await client.call("resources/read", {"uri": "file:///a b"})

    def prompt(seen: Seen) -> Reply:
        return json_reply(result(seen, {"messages": []}))

    def read(seen: Seen) -> Reply:
        return json_reply(result(seen, {"contents": []}))

    handler = mcp_handler(tools_call, **{"prompts/get": prompt, "resources/read": read})
    server = await run(handler, body)
    names = {seen.rpc_method: seen.headers.get("mcp-name") for seen in server.seen}
    assert names["tools/call"] == b64("café")
    assert names["prompts/get"] == "p"
    assert names["resources/read"] == "file:///a b"
    assert names["tools/list"] is None


async def test_sse_progress_then_the_answer_with_a_trace() -> None:
    async def tools_call(seen: Seen, count: int) -> Reply:
        token = seen.params["_meta"]["progressToken"]
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": token, "progress": 1, "total": 2},
        }
        return sse_reply([note, result(seen, text("streamed"))])

    progress: list[m.Progress] = []
    records: list[TraceRecord] = []

    async def body(client: Client, server: PeerHttpServer) -> None:
        out = await client.call_tool("plain", on_progress=progress.append)
        assert out["content"][0]["text"] == "streamed"

    await run(mcp_handler(tools_call), body, tracer=records.append)
    assert [(p.progress, p.total) for p in progress] == [(1, 2)]
    flow = [(r.dir, r.msg.get("method")) for r in records if r.flow is not None]
    assert flow == [("send", "tools/call"), ("recv", "notifications/progress"), ("recv", None)]


async def test_a_stream_that_breaks_before_the_answer_is_reissued_with_a_new_id() -> None:
    async def tools_call(seen: Seen, count: int) -> Reply:
        progress = {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "x"},
        }
        if count == 0:  # a broken stream
            return sse_reply([progress, result(seen, text("lost"))], break_after=1)
        if count == 1:  # a stream that ends cleanly but without the answer
            return sse_reply([progress])
        return sse_reply([result(seen, text("third time"))])

    async def body(client: Client, server: PeerHttpServer) -> None:
        assert (await client.call_tool("plain"))["content"][0]["text"] == "third time"

    server = await run(mcp_handler(tools_call), body)
    legs = [seen.body for seen in server.seen if seen.rpc_method == "tools/call"]
    assert len(legs) == 3 and len({leg["id"] for leg in legs}) == 3
    assert all(leg["params"] == legs[0]["params"] for leg in legs)


async def test_a_stream_that_always_breaks_ends_in_a_transport_error() -> None:
    async def tools_call(seen: Seen, count: int) -> Reply:
        return sse_reply([result(seen, text("never"))], break_after=0)

    async def body(client: Client, server: PeerHttpServer) -> None:
        with pytest.raises(TransportError) as caught:
            await client.call_tool("plain")
        assert caught.value.kind == "disconnect"

    server = await run(mcp_handler(tools_call), body)
    assert sum(seen.rpc_method == "tools/call" for seen in server.seen) == 4  # 1 + 3 reissues


async def test_a_leg_timeout_closes_the_stream() -> None:
    async def tools_call(seen: Seen, count: int) -> Reply:
        return sse_reply([], hold=True)

    async def body(client: Client, server: PeerHttpServer) -> None:
        with pytest.raises(CallTimeout) as caught:
            await client.call_tool("plain", leg_timeout=0.2)
        assert caught.value.limit == "leg"
        with trio.fail_after(2):
            while not server.abandoned:  # the server sees the stream closed: cancellation
                await trio.sleep(0.01)

    server = await run(mcp_handler(tools_call), body)
    assert [seen.rpc_method for seen in server.abandoned] == ["tools/call"]


async def test_a_stream_left_open_after_its_answer_is_closed_soon(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_streams, "LINGER_AFTER_ANSWER", 0.05)

    async def tools_call(seen: Seen, count: int) -> Reply:
        return sse_reply([result(seen, text("answered"))], hold=True)

    async def body(client: Client, server: PeerHttpServer) -> None:
        assert (await client.call_tool("plain"))["content"][0]["text"] == "answered"
        with trio.fail_after(2):
            while not server.abandoned:
                await trio.sleep(0.01)

    await run(mcp_handler(tools_call), body)


async def test_a_caller_that_gives_up_closes_the_stream() -> None:
    async def tools_call(seen: Seen, count: int) -> Reply:
        if count == 0:
            return sse_reply([], hold=True)
        return json_reply(result(seen, text("next")))

    async def body(client: Client, server: PeerHttpServer) -> None:
        with trio.move_on_after(0.2):
            await client.call_tool("plain")
        with trio.fail_after(2):
            while not server.abandoned:
                await trio.sleep(0.01)
        assert (await client.call_tool("plain"))["content"][0]["text"] == "next"

    await run(mcp_handler(tools_call), body)


async def test_http_errors_with_and_without_a_json_rpc_body() -> None:
    async def tools_call(seen: Seen, count: int) -> Reply:
        name = seen.params["name"]
        if name == "missing":
            return json_reply(error(seen, m.ErrorCode.METHOD_NOT_FOUND, "no such tool"), 404)
        if name == "anonymous":  # an error the server could not tie to an id
            return json_reply(error(None, m.ErrorCode.INVALID_PARAMS, "unreadable"), 400)
        if name == "anonymous-ok":  # the same with a 200
            return json_reply(error(None, m.ErrorCode.INVALID_REQUEST, "unreadable too"), 200)
        return Reply(500, [("Content-Type", "text/plain")], [b"upstream exploded"])

    async def body(client: Client, server: PeerHttpServer) -> None:
        with pytest.raises(CallError) as caught:
            await client.call_tool("missing")
        assert (caught.value.code, caught.value.message) == (-32601, "no such tool")
        with pytest.raises(CallError) as caught:
            await client.call_tool("anonymous")
        assert caught.value.code == m.ErrorCode.INVALID_PARAMS
        with pytest.raises(CallError) as caught:
            await client.call_tool("anonymous-ok")
        assert caught.value.code == m.ErrorCode.INVALID_REQUEST
        with pytest.raises(TransportError) as failed:
            await client.call_tool("other")
        assert (failed.value.kind, failed.value.status) == ("http", 500)
        assert "upstream exploded" in str(failed.value)

    await run(mcp_handler(tools_call), body)


async def test_a_header_mismatch_lists_tools_again_and_retries_once() -> None:
    async def tools_call(seen: Seen, count: int) -> Reply:
        if count == 0:
            return json_reply(
                error(seen, m.ErrorCode.HEADER_MISMATCH, "Mcp-Param-Region missing"), 400
            )
        return json_reply(result(seen, text("fixed")))

    async def body(client: Client, server: PeerHttpServer) -> None:
        assert (await client.call_tool("plain"))["content"][0]["text"] == "fixed"

    server = await run(mcp_handler(tools_call), body)
    methods = [seen.rpc_method for seen in server.seen]
    assert methods == ["server/discover", "tools/list", "tools/call", "tools/list", "tools/call"]


async def test_a_dropped_keep_alive_connection_is_replaced() -> None:
    async def tools_call(seen: Seen, count: int) -> Reply:
        reply = json_reply(result(seen, text(f"call {count}")))
        reply.close_after = True  # the server drops the connection without saying so
        return reply

    async def body(client: Client, server: PeerHttpServer) -> None:
        for count in range(3):
            assert (await client.call_tool("plain"))["content"][0]["text"] == f"call {count}"

    records: list[TraceRecord] = []
    server = await run(mcp_handler(tools_call), body, era="modern", tracer=records.append)
    assert [seen.rpc_method for seen in server.seen] == ["tools/list"] + ["tools/call"] * 3
    assert server.connections == 3
    # Each call went out once: the POST was retried on a fresh connection, not re-issued.
    assert sum(r.dir == "send" and r.flow is not None for r in records) == 3


async def test_a_refused_connection_is_a_connect_error() -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    await listeners[0].aclose()  # nothing listens there any more
    with trio.fail_after(5), pytest.raises(TransportError) as caught:
        async with open_http_client(f"http://127.0.0.1:{port}/mcp"):
            raise AssertionError("connected")
    assert caught.value.kind == "connect"


async def opening_fails(server: PeerHttpServer, expected: type[E], **options: Any) -> E:
    """The error that opening a client to ``server`` raises (it must raise one)."""
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            url = await nursery.start(server.run)
            with pytest.raises(expected) as caught:
                async with open_http_client(url, **options):
                    raise AssertionError("opened a session")
            nursery.cancel_scope.cancel()
    return caught.value


@pytest.mark.parametrize(
    "reply",
    [
        Reply(400, [("Content-Type", "text/plain")], [b"Bad Request: No valid session ID"]),
        Reply(405, [], []),
        json_reply({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "?"}}, 404),
    ],
)
async def test_a_refused_probe_falls_back_to_a_2025_initialize(reply: Reply) -> None:
    # The probe's refusal is the 2025 signal: the client goes on with initialize (here
    # refused too, so opening fails, naming initialize and the status).
    async def legacy(seen: Seen) -> Reply:
        return reply

    server = PeerHttpServer(legacy)
    failure = await opening_fails(server, ClientError)
    if isinstance(failure, CallError):  # the JSON-RPC error, when its id is initialize's
        assert failure.code == -32601
    else:
        assert isinstance(failure, TransportError) and "initialize" in str(failure)
    assert [seen.rpc_method for seen in server.seen] == ["server/discover", "initialize"]
    assert "mcp-protocol-version" not in server.seen[1].headers  # (its version is in the body)


async def test_only_what_really_went_out_is_traced_as_sent() -> None:
    # Regression: the trace had a send for a message the link refused, and for a POST
    # to a port where nobody listens.
    async def legacy(seen: Seen) -> Reply:
        return Reply(405, [], [])

    records: list[TraceRecord] = []
    await opening_fails(PeerHttpServer(legacy), TransportError, tracer=records.append)
    sent = [(r.dir, r.msg.get("method")) for r in records]
    assert sent == [("send", "server/discover"), ("send", "initialize")]

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    await listeners[0].aclose()  # nothing listens there any more
    unsent: list[TraceRecord] = []
    with trio.fail_after(5), pytest.raises(TransportError) as caught:
        async with open_http_client(f"http://127.0.0.1:{port}/mcp", tracer=unsent.append):
            raise AssertionError("connected")
    assert caught.value.kind == "connect" and unsent == []


async def test_a_recognised_modern_error_never_falls_back() -> None:
    async def unsupported(seen: Seen) -> Reply:
        data = {"supported": ["2099-01-01"], "requested": "2026-07-28"}
        return json_reply(
            error(seen, m.ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, "unsupported", data), 400
        )

    server = PeerHttpServer(unsupported)
    assert (await opening_fails(server, CallError)).code == m.ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
    assert [seen.rpc_method for seen in server.seen] == ["server/discover"]  # no initialize


# The conformance scenario request-metadata answers the first request with -32022 whose
# data.supported names the very version that was requested, and expects one retry with it.
async def test_a_version_rejection_naming_our_version_is_retried_once() -> None:
    rejected = False

    async def handler(seen: Seen) -> Reply:
        nonlocal rejected
        if not rejected:
            rejected = True
            data = {"supported": ["2026-07-28"], "requested": "2026-07-28"}
            return json_reply(
                error(seen, m.ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, "unsupported", data), 400
            )
        return json_reply(result(seen, DISCOVER))

    async def body(client: Client, server: PeerHttpServer) -> None:
        assert client.protocol_version == "2026-07-28"

    server = await run(handler, body)
    assert [seen.rpc_method for seen in server.seen] == ["server/discover"] * 2
