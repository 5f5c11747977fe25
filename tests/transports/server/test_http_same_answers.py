"""One endpoint, whichever server runs it (issue 21): ``HttpServer`` (``mrtr serve --http``) and
``McpAsgi`` under hypercorn's trio worker answer the same requests with the same status,
the same headers that matter and the same body.

Each request of the battery (2026-07-28 calls, every refusal, a 2025-era session's
refusals, the side routes) is sent to both, serving the conformance fixtures app
in this process on 127.0.0.1, and the answers are compared field by field."""

from __future__ import annotations

import json
from typing import Any

import trio
from support.asgi_hosts import HYPERCORN
from support.conformance_app import build_conformance_app
from test_http_server import Reply, Served, rpc, serving, tool_call

fixtures_app = build_conformance_app()

#: Headers that are the endpoint's to set (the rest, e.g. date and server, are the server's).
COMPARED = ("content-type", "allow", "retry-after", "cache-control", "mcp-session-id")

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}},
}
LEGACY_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
IN_2025 = [("MCP-Protocol-Version", "2025-11-25")]
CALLBACK = "/mcp/auth/callback"


def battery() -> list[tuple[str, Any, dict[str, Any]]]:
    """(name, message, ``Served.post`` options) for each request."""
    call = tool_call("test_simple_text")
    wrong_name = [("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "tools/call")]
    wrong_name.append(("Mcp-Name", "another_tool"))
    return [
        ("a call", call, {}),
        ("server/discover", rpc("server/discover"), {}),
        ("a notification", rpc("notifications/cancelled", {"requestId": 9}, rid=None), {}),
        ("ping is not 2026", rpc("ping"), {}),
        ("an unknown tool", tool_call("no_such_tool"), {}),
        ("a foreign Origin", call, {"extra": [("Origin", "http://evil.example")]}),
        ("two Origins", call, {"extra": [("Origin", "http://localhost")] * 2}),
        ("Accept: text/html", call, {"accept": "text/html"}),
        ("Accept: JSON only", tool_call("test_tool_with_progress"), {"accept": "application/json"}),
        ("Content-Type", call, {"extra": [("Content-Type", "text/plain")]}),
        ("a mirror that lies", call, {"headers": wrong_name}),
        ("an empty body", None, {"body": b""}),
        ("not JSON", None, {"body": b"{nope"}),
        ("a batch", None, {"body": json.dumps([call]).encode()}),
        ("GET without a session", None, {"method": "GET"}),
        ("HEAD", None, {"method": "HEAD"}),
        ("PUT", None, {"method": "PUT"}),
        ("another path", call, {"target": "/other"}),
        ("a session's request without it", LEGACY_LIST, {"headers": IN_2025}),
        ("an unknown session", LEGACY_LIST, {"headers": [*IN_2025, ("Mcp-Session-Id", "x")]}),
        ("an unknown session's GET", None, {"method": "GET", "headers": [("Mcp-Session-Id", "x")]}),
        ("DELETE of none", None, {"method": "DELETE", "headers": [("Mcp-Session-Id", "x")]}),
        ("initialize for SSE only", INITIALIZE, {"headers": [], "accept": "text/event-stream"}),
        ("the health check", None, {"method": "GET", "target": "/healthz", "accept": None}),
        ("POST to the health check", None, {"target": "/healthz", "body": b"{}"}),
        (
            "a callback without state",
            None,
            {"method": "GET", "target": "/mcp/auth/callback?code=1"},
        ),
        (
            "a callback nobody waits for",
            None,
            {"method": "GET", "target": CALLBACK + "?code=1&state=" + "A" * 32},
        ),
        ("POST to the callback", None, {"target": CALLBACK, "body": b"{}"}),
    ]


def comparable(reply: Reply) -> tuple[int, dict[str, str], Any]:
    headers = {k: v for k, v in reply.headers.items() if k in COMPARED}
    body: Any = reply.body
    if reply.headers.get("content-type") == "application/json" and reply.body:
        body = json.loads(reply.body)
    elif reply.headers.get("content-type") == "text/event-stream":
        body = reply.events()
    return reply.status, headers, body


async def answers(kind: str) -> dict[str, tuple[int, dict[str, str], Any]]:
    found = {}
    async with serving(fixtures_app, kind=kind, max_body_size=4096) as served:
        for name, message, options in battery():
            found[name] = comparable(await _post(served, message, options))
        # The same big body to both: 413.
        found["a body past max_body_size"] = comparable(
            await served.post(tool_call("test_simple_text", {"pad": "x" * 5000}))
        )
        # A session, then its refusals: initialize's answer differs only in its session id.
        opened = await served.post(INITIALIZE, [])
        status, headers, body = comparable(opened)
        found["initialize"] = (status, {**headers, "mcp-session-id": "<id>"}, body)
        session = [*IN_2025, ("Mcp-Session-Id", opened.headers["mcp-session-id"])]
        found["a session's JSON-only request"] = comparable(
            await served.post(LEGACY_LIST, session, accept="application/json")
        )
        found["a session's ping"] = comparable(
            await served.post({"jsonrpc": "2.0", "id": 3, "method": "ping"}, session)
        )
        found["a session's DELETE"] = comparable(await served.post(None, session, method="DELETE"))
    return found


async def _post(served: Served, message: Any, options: dict[str, Any]) -> Reply:
    return await served.post(message, options.pop("headers", None), **options)


async def test_mrtr_serve_and_mcp_asgi_under_hypercorn_answer_alike() -> None:
    with trio.fail_after(30):
        ours = await answers("mrtr")
        asgi_answers = await answers(HYPERCORN)
    assert ours.keys() == asgi_answers.keys()
    statuses = {status for status, _, _ in ours.values()}
    assert statuses >= {200, 202, 204, 400, 403, 404, 405, 406, 410, 413}  # (every kind)
    different = {
        name: (ours[name], asgi_answers[name]) for name in ours if ours[name] != asgi_answers[name]
    }
    assert not different, "\n".join(
        f"{k}:\n  ours {a}\n  asgi {b}" for k, (a, b) in different.items()
    )
