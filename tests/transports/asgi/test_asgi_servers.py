"""``McpAsgi`` under real ASGI servers: uvicorn (asyncio) and hypercorn's trio worker.

Each server runs as a subprocess on 127.0.0.1, serving ``support.asgi_apps:app``: a
Starlette application with the MCP endpoint (``Route("/mcp", McpAsgi(...))``) beside
other routes.  Our own client drives it (``mrtr call`` as a subprocess, and the
client library), through a plain call and a two-round tool; raw HTTP checks the
refusals (Origin, size, headers, methods) and the SSE answer, and a client that
goes away cancels its handler on either loop.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from mrtr_transports.client.http import open_http_client
from support.asgi_apps import MAX_BODY
from support.asgi_servers import META, SERVERS, error_of, post, serving, text_of
from support.raw_http import ACCEPT_BOTH, sse_messages, tool_call

import mrtr_core as m

pytestmark = pytest.mark.subprocess


@pytest.fixture(scope="module", params=sorted(SERVERS))
def base(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server per kind for the whole module: its base URL."""
    log = tmp_path_factory.mktemp("asgi") / f"{request.param}.log"
    with serving(request.param, "support.asgi_apps:app", log) as url:
        yield url


def mrtr_call(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mrtr_transports.cli.main", "call", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


# --- Our client, through the endpoint mounted beside other routes ---


def test_a_plain_call_beside_another_route(base: str) -> None:
    done = mrtr_call(f"{base}/mcp", "greet", '{"name": "Ada"}')
    assert done.returncode == 0, done.stderr
    assert text_of(json.loads(done.stdout)) == "hello, Ada"
    status, _, body = post(base, None, method="GET", path="/health", accept="*/*")
    assert (status, body) == (200, b"ok")  # the other route is Starlette's, untouched


def test_two_rounds_with_mrtr_call(base: str, tmp_path: Path) -> None:
    trace = tmp_path / "trace.ndjson"
    answer = 'city={"action": "accept", "content": {"city": "Lisbon"}}'
    done = mrtr_call(
        f"{base}/mcp", "trip", '{"days": 3}', "--answer", answer, "--trace", str(trace)
    )
    assert done.returncode == 0, done.stderr
    assert text_of(json.loads(done.stdout)) == "Trip to Lisbon for 3 days"
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    calls = [line for line in lines if '"tools/call"' in json.dumps(line)]
    rounds = [json.dumps(line) for line in lines if "input_required" in json.dumps(line)]
    assert len(rounds) >= 1 and len(calls) >= 2, lines  # input_required, then the retry


@pytest.mark.parametrize("era", ["legacy", "auto"])
def test_mrtr_call_in_either_era(base: str, era: str, tmp_path: Path) -> None:
    # legacy: a 2025-11-25 session (initialize, Mcp-Session-Id, the shim's question on the
    # request's stream, DELETE); auto: the probe finds 2026-07-28.
    trace = tmp_path / "trace.ndjson"
    key = "elicitation/create" if era == "legacy" else "city"  # (a 2025 question has no key)
    answer = key + '={"action": "accept", "content": {"city": "Lisbon"}}'
    done = mrtr_call(
        "--era", era, f"{base}/mcp", "trip", '{"days": 3}', "--answer", answer,
        "--trace", str(trace),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert text_of(json.loads(done.stdout)) == "Trip to Lisbon for 3 days"
    said = trace.read_text()
    if era == "legacy":
        assert '"initialize"' in said and "elicitation/create" in said
    else:
        assert '"server/discover"' in said and "input_required" in said


async def test_two_rounds_with_the_client_library(base: str) -> None:
    asked: list[str] = []

    async def answer(key: str, request: m.wire.InputRequest) -> Any:
        asked.append(key)
        return {"action": "accept", "content": {"city": "Porto"}}

    async with open_http_client(
        f"{base}/mcp", answer=answer, capabilities={"elicitation": {}}
    ) as client:
        result = await client.call_tool("trip", {"days": 2})
    assert text_of(result) == "Trip to Porto for 2 days"
    assert asked == ["city"]


# --- The answer: JSON, or SSE once the handler streams ---


def test_progress_turns_the_answer_into_an_sse_stream(base: str) -> None:
    status, headers, body = post(base, tool_call("steps", progress_token="p1"))
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    assert headers["x-accel-buffering"] == "no" and headers["cache-control"] == "no-cache"
    messages = sse_messages(body)
    progress = [msg["params"]["progress"] for msg in messages[:-1]]
    assert progress == [1, 2, 3]
    assert text_of(messages[-1]["result"]) == "done in 3 steps"


def test_a_stream_that_waits_gets_keepalive_comments(base: str) -> None:
    status, headers, body = post(base, tool_call("pause", progress_token="p2"))
    assert (status, headers["content-type"]) == (200, "text/event-stream")
    assert body.count(b"\n:\n") >= 1  # comments every 0.2 s while the handler waited
    assert text_of(sse_messages(body)[-1]["result"]) == "paused"


def test_a_client_that_takes_only_json_gets_json(base: str) -> None:
    status, headers, body = post(
        base, tool_call("steps", progress_token="p1"), accept="application/json"
    )
    assert (status, headers["content-type"]) == (200, "application/json")
    assert text_of(json.loads(body)["result"]) == "done in 3 steps"


def test_a_notification_gets_202(base: str) -> None:
    note = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 9, "_meta": {m.wire.META_PROTOCOL_VERSION: "2026-07-28"}},
    }
    status, _, body = post(base, note)
    assert (status, body) == (202, b"")


# --- Refusals: mrtr serve --http's statuses and JSON-RPC error bodies ---


def test_a_foreign_origin_is_refused(base: str) -> None:
    status, _, body = post(base, tool_call("greet"), headers={"Origin": "http://evil.example"})
    assert status == 403
    assert "allowed_origins" in error_of(body)["message"]
    status, _, _ = post(base, tool_call("greet"), headers={"Origin": "http://localhost:3000"})
    assert status == 200  # a loopback origin is allowed by default


def test_a_foreign_host_is_refused(base: str) -> None:
    status, _, body = post(base, tool_call("greet"), headers={"Host": "attacker.example"})
    assert status == 403 and "allowed_hosts" in error_of(body)["message"]


def test_a_body_over_the_bound_is_refused(base: str) -> None:
    message = tool_call("greet", {"name": "x" * (MAX_BODY + 1)})
    status, _, body = post(base, message)  # declared in Content-Length: refused unread
    assert status == 413 and str(MAX_BODY) in error_of(body)["message"]
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    data = json.dumps(message).encode()
    chunks = iter([data[i : i + 8192] for i in range(0, len(data), 8192)])
    headers = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json"}
    try:  # chunked, so no length is declared: the bound holds as the bytes arrive
        conn.request("POST", "/mcp", body=chunks, headers=headers, encode_chunked=True)
        response = conn.getresponse()
        assert response.status == 413 and str(MAX_BODY) in error_of(response.read())["message"]
    finally:
        conn.close()


def test_header_mismatch_is_32020(base: str) -> None:
    status, _, body = post(base, tool_call("greet"), headers={"Mcp-Name": "steps"})
    assert status == 400 and error_of(body)["code"] == m.ErrorCode.HEADER_MISMATCH


def test_accept_and_content_type(base: str) -> None:
    assert post(base, tool_call("greet"), accept="text/html")[0] == 406
    assert post(base, tool_call("greet"), headers={"Content-Type": "text/plain"})[0] == 415
    status, _, body = post(base, None, body=b"  ")
    assert status == 400 and error_of(body)["code"] == m.ErrorCode.PARSE_ERROR


def test_get_and_head_without_a_session_are_405(base: str) -> None:
    # GET and DELETE are a 2025-era session's (with its Mcp-Session-Id), as under mrtr serve --http.
    status, headers, body = post(base, None, method="GET")
    assert (status, headers["allow"]) == (405, "GET, POST, DELETE")
    assert "Mcp-Session-Id" in error_of(body)["message"]
    status, headers, body = post(base, None, method="HEAD")
    assert (status, headers["allow"], body) == (405, "GET, POST, DELETE", b"")


def test_without_the_lifespan_2025_era_messages_are_told_the_version(base: str) -> None:
    # Mounted in Starlette, the endpoint's lifespan does not run: no sessions, 2026 only.
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}},
    }
    headers = {"MCP-Protocol-Version": "2025-11-25"}
    status, _, body = post(base, initialize, headers=headers, path="/api/mcp")
    assert status == 400
    reply = json.loads(body)
    assert reply["id"] == 1
    assert reply["error"]["code"] == m.ErrorCode.UNSUPPORTED_PROTOCOL_VERSION
    assert reply["error"]["data"]["supported"] == ["2026-07-28"]


def test_ping_is_not_a_2026_method(base: str) -> None:
    ping = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "ping",
        "params": {"_meta": META},
    }
    status, _, body = post(base, ping)
    assert status == 404 and error_of(body)["code"] == m.ErrorCode.METHOD_NOT_FOUND


def test_server_discover_is_answered_by_the_connection(base: str) -> None:
    discover = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "server/discover",
        "params": {"_meta": META},
    }
    status, _, body = post(base, discover)
    assert status == 200
    result = json.loads(body)["result"]
    assert result["_meta"][m.wire.META_SERVER_INFO]["name"] == "asgi-test"
    assert "2026-07-28" in result["supportedVersions"]


# --- Cancellation: a client that goes away cancels its handler, on either loop ---


def test_a_client_that_goes_away_cancels_its_handler(base: str) -> None:
    before = stats(base)["cancelled"]
    parts = urlsplit(base)
    message = tool_call("sleep")
    body = json.dumps(message).encode()
    head = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{parts.port}",
        f"Accept: {ACCEPT_BOTH}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        *(f"{k}: {v}" for k, v in m.http.request_headers(message)),
    ]
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        time.sleep(0.5)  # the handler is asleep by now
    deadline = time.monotonic() + 20
    while stats(base)["cancelled"] == before:
        assert time.monotonic() < deadline, "the handler was not cancelled"
        time.sleep(0.05)
    assert stats(base)["cancelled"] == before + 1


def stats(base: str) -> dict[str, int]:
    status, _, body = post(base, None, method="GET", path="/stats", accept="*/*")
    assert status == 200
    found: dict[str, int] = json.loads(body)
    return found
