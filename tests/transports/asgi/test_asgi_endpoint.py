"""``McpAsgi`` mounted under a prefix, and alone: its own 404, lifespan, the listen pool
and the graceful end of a listen stream (``McpApp``'s streams wait on the loop they run
on: asyncio under uvicorn, trio under hypercorn's trio worker), and the options it
refuses."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from mrtr_transports.asgi import McpAsgi
from support.asgi_apps import mcp
from support.asgi_servers import META, SERVERS, error_of, post, serving, text_of
from support.raw_http import ACCEPT_BOTH, sse_messages, tool_call

import mrtr_core as m

pytestmark = pytest.mark.subprocess

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


@pytest.mark.parametrize("server", sorted(SERVERS))
def test_mounted_under_a_prefix(server: str, tmp_path: Path) -> None:
    with serving(server, "support.asgi_apps:app", tmp_path / "log") as base:
        status, _, body = post(base, tool_call("greet", {"name": "Bo"}), path="/api/mcp")
        assert status == 200 and text_of(json.loads(body)["result"]) == "hello, Bo"


@pytest.fixture(params=sorted(SERVERS))
def bare(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with serving(request.param, "support.asgi_apps:bare", tmp_path / "log") as base:
        yield base


def test_alone_it_answers_other_paths_with_404(bare: str) -> None:
    status, _, body = post(bare, tool_call("greet"), path="/elsewhere")
    assert status == 404 and "'/mcp'" in error_of(body)["message"]
    status, _, body = post(bare, tool_call("greet"))
    assert status == 200 and text_of(json.loads(body)["result"]) == "hello, world"


def listen_request(rid: int) -> dict[str, object]:
    params = {"notifications": {"toolsListChanged": True}, "_meta": META}
    return {"jsonrpc": "2.0", "id": rid, "method": "subscriptions/listen", "params": params}


def test_listen_streams_are_pooled_and_end_gracefully(bare: str) -> None:
    parts = urlsplit(bare)
    first = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    message = listen_request(7)
    headers = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json"}
    headers.update(m.http.request_headers(message))
    try:
        first.request("POST", "/mcp", body=json.dumps(message).encode(), headers=headers)
        stream = first.getresponse()  # the acknowledgement opened the stream
        assert stream.getheader("content-type") == "text/event-stream"
        # One stream per client: a second is refused, with when to come back.
        status, got, body = post(bare, listen_request(8))
        assert status == 429 and int(got["retry-after"]) >= 1
        assert error_of(body)["code"] == m.ErrorCode.SERVER_BUSY
        # At the lifetime (1 s) the stream ends with the graceful closure.
        final = sse_messages(stream.read())[-1]
        assert final["id"] == 7 and final["result"]["_meta"][SUBSCRIPTION_ID] == 7
    finally:
        first.close()
    status, _, _ = post(bare, tool_call("greet"))  # (the pool is free again)
    assert status == 200


def test_the_health_check_answers_any_host_and_origin_with_a_tiny_body(bare: str) -> None:
    # A balancer dials the pod's address, sends no Accept, maybe an Origin: all fine.
    probe = {"Host": "10.1.2.3", "Origin": "https://elsewhere.example"}
    status, headers, body = post(bare, None, method="GET", path="/healthz?probe=1", headers=probe)
    assert (status, body) == (200, b'{"status":"ok"}')
    assert headers["content-type"] == "application/json"
    assert headers["cache-control"] == "no-store"
    status, _, body = post(bare, None, method="HEAD", path="/healthz", headers=probe)
    assert (status, body) == (200, b"")
    status, headers, _ = post(bare, None, path="/healthz", body=b"{}")
    assert status == 405 and headers["allow"] == "GET, HEAD"
    # The endpoint keeps its rules: the same Host is refused there.
    assert post(bare, None, body=b"{}", headers=probe)[0] == 403


async def test_the_health_check_says_draining_once_shutting_down() -> None:
    endpoint = McpAsgi(mcp, health_path="/ready")
    said: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def collect(message: dict[str, object]) -> None:
        said.append(message)

    scope = {"type": "http", "method": "GET", "path": "/ready", "headers": []}
    await endpoint(scope, receive, collect)  # type: ignore[arg-type]
    assert said[0]["status"] == 200
    endpoint.shutdown()
    said.clear()
    await endpoint(scope, receive, collect)  # type: ignore[arg-type]
    assert said[0]["status"] == 503 and said[1]["body"] == b'{"status":"draining"}'
    assert (b"retry-after", b"1") in said[0]["headers"]  # type: ignore[operator]
    with pytest.raises(ValueError, match="health_path"):
        McpAsgi(mcp, health_path="/mcp")


@pytest.mark.parametrize(
    "options",
    [
        {"max_body_size": 0},
        {"max_sessions": 0},
        {"session_idle_timeout": 0},
        {"max_listen_streams": -1},
        {"write_timeout": 0},
        {"listen_lifetime": -1.0},
        {"versions": ("1999-01-01",)},  # no 2026-07-28 version left: the connection refuses
    ],
)
def test_bad_options_fail_at_construction(options: dict[str, object]) -> None:
    with pytest.raises((ValueError, m.MrtrError)):
        McpAsgi(mcp, **options)  # type: ignore[arg-type]


async def test_a_websocket_without_mcp_is_refused_and_unknown_scopes_raise() -> None:
    # (A server without the denial-response extension: the close before the accept is
    # all it can say; with it, the refusal is a 400 with a body: test_asgi_websocket_scope.)
    sent: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    endpoint = McpAsgi(mcp)
    await endpoint({"type": "websocket", "path": "/mcp"}, receive, send)  # type: ignore[arg-type]
    assert [(said["type"], said["code"]) for said in sent] == [("websocket.close", 1008)]
    assert "subprotocol 'mcp'" in str(sent[0]["reason"])
    with pytest.raises(ValueError, match="unsupported ASGI scope"):
        await endpoint({"type": "telepathy"}, receive, send)  # type: ignore[arg-type]


async def test_two_host_headers_are_refused_by_the_endpoint_too() -> None:
    # h11 refuses them before any app sees them; a server whose parser lets them through
    # meets the same 400 at the endpoint.
    endpoint = McpAsgi(mcp)
    said: list[dict[str, object]] = []

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def collect(message: dict[str, object]) -> None:
        said.append(message)

    headers = [(b"host", b"localhost"), (b"host", b"evil.example.com")]
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
    await endpoint(scope, receive, collect)  # type: ignore[arg-type]
    assert said[0]["status"] == 400
    assert "multiple Host" in error_of(said[1]["body"])["message"]  # type: ignore[arg-type]


def test_uvicorn_runs_its_lifespan(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with serving("uvicorn", "support.asgi_apps:bare", log) as base:
        assert post(base, tool_call("greet"))[0] == 200
    text = log.read_text()
    assert "Application startup complete" in text
    assert "Application shutdown complete" in text and "error" not in text.lower()


async def test_after_shutdown_new_listen_streams_are_refused() -> None:
    """The lifespan protocol spoken to the endpoint directly, then a listen request."""
    endpoint = McpAsgi(mcp)
    events = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    said: list[dict[str, object]] = []

    async def lifespan_receive() -> dict[str, object]:
        return events.pop(0)

    async def collect(message: dict[str, object]) -> None:
        said.append(message)

    await endpoint({"type": "lifespan"}, lifespan_receive, collect)  # type: ignore[arg-type]
    assert [e["type"] for e in said] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert endpoint.closing
    message = listen_request(3)
    headers = [(b"host", b"localhost"), (b"content-type", b"application/json")]
    headers += [(k.lower().encode(), v.encode()) for k, v in m.http.request_headers(message)]
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
    body = [{"type": "http.request", "body": json.dumps(message).encode(), "more_body": False}]
    said.clear()

    async def receive() -> dict[str, object]:
        return body.pop(0)

    await endpoint(scope, receive, collect)  # type: ignore[arg-type]
    assert said[0]["status"] == 503
    assert (b"retry-after", b"1") in said[0]["headers"]  # type: ignore[operator]
    assert "shutting down" in error_of(said[1]["body"])["message"]  # type: ignore[arg-type]


async def test_server_checks_head_leaves_the_head_size_to_the_server() -> None:
    """A head over ``max_header_size`` is the endpoint's 431 on a foreign server; with
    ``server_checks_head`` (our host measured it already) the endpoint goes on to its
    next rule (here the GET without a session: 405)."""
    big = [(b"host", b"localhost"), (b"x-padding", b"a" * 2048)]
    scope = {"type": "http", "method": "GET", "path": "/mcp", "headers": big}

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    statuses = []
    for checks in (False, True):
        said: list[dict[str, object]] = []

        async def collect(message: dict[str, object], said: list[dict[str, object]] = said) -> None:
            said.append(message)

        endpoint = McpAsgi(mcp, max_header_size=1024, server_checks_head=checks)
        await endpoint(scope, receive, collect)  # type: ignore[arg-type]
        statuses.append(said[0]["status"])
    assert statuses == [431, 405]
