"""``McpAsgi(auth=ResourceAuth(...))`` served by the project's host (``HttpServer``) on
127.0.0.1, both loops, with real JWTs and a JWKS served over HTTP: the metadata at
the well-known URLs, 401 with the challenge for no token and for each bad one (the app
never runs), the identity as ``ctx.identity`` and as the principal of sealed state and
tasks (a second user cannot redeem the first user's state nor see their task), 403
``insufficient_scope`` for a tool's scopes, the WebSocket upgrade, tokens kept out of
the logs."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from authserver_kit import (
    ISSUER,
    RESOURCE,
    AuthServerApp,
    Issuer,
    hmac_with_public_key,
    hosting,
    mcp_headers,
    post,
    request,
    unsigned_token,
)
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.auth import JwksKeys, JwtVerifier, ResourceAuth
from mrtr_transports.client.errors import CallError, TransportError
from mrtr_transports.client.http import open_http_client
from mrtr_transports.client.ws import open_ws_client
from mrtr_transports.server.http import HttpServer

import mrtr_core as m
from mrtr_core.auth import BearerChallenge

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"
METADATA_URL = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"
CONFIRM = m.server.elicit_form("Go on?", {"ok": {"type": "boolean"}}, required=["ok"])


def meta(**extra: Any) -> dict[str, Any]:
    return {
        m.wire.META_PROTOCOL_VERSION: VERSION,
        m.wire.META_CLIENT_CAPABILITIES: {"elicitation": {}},
        **extra,
    }


def call(
    name: str, arguments: dict[str, Any] | None = None, rid: int = 1, **params: Any
) -> dict[str, Any]:
    body = {"name": name, "arguments": arguments or {}, "_meta": meta(), **params}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": body}


class Calls:
    count = 0


def make_app() -> McpApp:
    app = McpApp("auth-test", "1.0")

    @app.tool
    def whoami(ctx: Context) -> str:
        """Who the token says is calling."""
        Calls.count += 1
        identity = ctx.identity
        assert identity is not None
        return json.dumps(
            {"sub": identity.subject, "iss": identity.issuer, "scopes": sorted(identity.scopes)}
        )

    @app.tool(scopes=["admin"])
    def purge(ctx: Context) -> str:
        """Needs the admin scope."""
        Calls.count += 1
        return "purged"

    @app.tool
    def confirm(ctx: Context) -> Any:
        """Asks, then answers: its sealed state is the caller's."""
        answer = ctx.answer("ok", CONFIRM)
        if answer is None:
            return ctx.ask({"ok": CONFIRM})
        return "confirmed"

    @app.tool(continuation=True)
    async def parked(ctx: Context) -> str:
        """Waits for an answer in a continuation, then says who resumed it."""
        await ctx.wait_for({"ok": CONFIRM})
        assert ctx.identity is not None
        return f"{ctx.identity.subject} {' '.join(sorted(ctx.identity.scopes))}"

    async def slow_work(task: Any) -> str:
        await anyio.sleep(0.05)
        return f"done for {task.identity.subject}"

    @app.tool(task="optional")
    def background(ctx: Context) -> Any:
        """Runs as a task: the caller's task."""
        return ctx.run_task(slow_work)

    return app


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
async def served(issuer: Issuer) -> AsyncIterator[tuple[HttpServer, int]]:
    as_app = AuthServerApp(issuer)
    async with hosting(as_app) as as_port:
        verifier = JwtVerifier(
            issuer=ISSUER, audience=RESOURCE, jwks=f"http://127.0.0.1:{as_port}/jwks"
        )
        auth = ResourceAuth(
            verifier,
            resource=RESOURCE,
            authorization_servers=[ISSUER],
            scopes_supported=["mcp:tools", "admin"],
        )
        server = HttpServer(make_app(), auth=auth, keepalive_interval=0.05)
        async with anyio.create_task_group() as tasks:
            _, port = await tasks.start(server.serve, "127.0.0.1", 0)
            try:
                yield server, port
            finally:
                await server.aclose(grace=0.2)


async def test_the_metadata_is_published_at_the_well_known_urls(
    served: tuple[HttpServer, int],
) -> None:
    _, port = served
    for path in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ):
        reply = await request(port, "GET", path)  # no token, no Origin rules: public
        assert reply.status == 200
        document = m.auth.ResourceMetadata.from_json(json.loads(reply.body), resource=RESOURCE)
        assert document.authorization_servers == (ISSUER,)
        assert document.scopes_supported == ("mcp:tools", "admin")
        assert reply.header("access-control-allow-origin") == "*"
    assert (await request(port, "POST", "/.well-known/oauth-protected-resource")).status == 405
    # The health check stays outside the gate.
    assert (await request(port, "GET", "/healthz")).status == 200


async def test_no_token_is_401_with_the_challenge(served: tuple[HttpServer, int]) -> None:
    _, port = served
    Calls.count = 0
    reply = await post(port, call("whoami"), None)
    assert reply.status == 401
    challenge = BearerChallenge.from_headers(reply.header("www-authenticate") or "")
    assert challenge is not None
    assert challenge.resource_metadata == METADATA_URL
    assert challenge.error is None
    assert reply.json()["error"]["code"] == m.ErrorCode.INVALID_REQUEST
    # Other methods at the path too (a 2025 session's GET), and a token in another scheme.
    get = await request(port, "GET", "/mcp", headers=[("mcp-session-id", "x")])
    assert get.status == 401
    message = call("whoami")
    headers = [*mcp_headers(message, None), ("authorization", "Basic YWxpY2U6c2VjcmV0")]
    basic = await request(port, "POST", "/mcp", headers=headers, body=json.dumps(message).encode())
    assert basic.status == 401
    basic_challenge = BearerChallenge.from_headers(basic.header("www-authenticate") or "")
    assert basic_challenge is not None and basic_challenge.error == "invalid_request"
    two = [*mcp_headers(message, "a"), ("authorization", "Bearer b")]
    assert (
        await request(port, "POST", "/mcp", headers=two, body=json.dumps(message).encode())
    ).status == 400
    assert Calls.count == 0


BAD = {
    "another resource": lambda i: i.token(aud="https://other.example.test/mcp"),
    "expired": lambda i: i.token(exp_in=-3600),
    "not yet valid": lambda i: i.token(nbf_in=3600),
    "wrong issuer": lambda i: i.token(iss="https://evil.example.test"),
    "alg none": lambda i: unsigned_token(),
    "HS256 with the RSA public key": hmac_with_public_key,
}


@pytest.mark.parametrize("case", sorted(BAD))
async def test_a_bad_token_is_401_invalid_token_and_no_access(
    case: str, issuer: Issuer, served: tuple[HttpServer, int], caplog: pytest.LogCaptureFixture
) -> None:
    _, port = served
    caplog.set_level(logging.DEBUG)
    Calls.count = 0
    token = BAD[case](issuer)
    reply = await post(port, call("whoami"), token)
    assert reply.status == 401
    challenge = BearerChallenge.from_headers(reply.header("www-authenticate") or "")
    assert challenge is not None
    assert (challenge.error, challenge.resource_metadata) == ("invalid_token", METADATA_URL)
    assert Calls.count == 0
    assert token not in reply.body.decode() and token not in caplog.text


async def test_the_identity_is_on_ctx(issuer: Issuer, served: tuple[HttpServer, int]) -> None:
    _, port = served
    reply = await post(port, call("whoami"), issuer.token("alice", scope="mcp:tools"))
    assert reply.status == 200, reply.body
    said = json.loads(reply.json()["result"]["content"][0]["text"])
    assert said == {"sub": "alice", "iss": ISSUER, "scopes": ["mcp:tools"]}


async def test_a_tool_s_scope_is_403_insufficient_scope_before_it_runs(
    issuer: Issuer, served: tuple[HttpServer, int]
) -> None:
    _, port = served
    Calls.count = 0
    reply = await post(port, call("purge"), issuer.token("alice", scope="mcp:tools"))
    assert reply.status == 403
    challenge = BearerChallenge.from_headers(reply.header("www-authenticate") or "")
    assert challenge is not None
    assert (challenge.error, challenge.scope) == ("insufficient_scope", ("admin",))
    assert challenge.resource_metadata == METADATA_URL
    assert Calls.count == 0
    granted = await post(port, call("purge"), issuer.token("alice", scope="mcp:tools admin"))
    assert granted.status == 200
    assert granted.json()["result"]["content"][0]["text"] == "purged"
    assert Calls.count == 1


async def test_a_second_user_cannot_redeem_the_first_user_s_state(
    issuer: Issuer, served: tuple[HttpServer, int]
) -> None:
    _, port = served
    alice, bob = issuer.token("alice"), issuer.token("bob")
    first = call("confirm")
    asked = (await post(port, first, alice)).json()["result"]
    assert asked["resultType"] == "input_required"
    state = asked["requestState"]
    answers = {"ok": {"action": "accept", "content": {"ok": True}}}
    retry = {
        **first,
        "id": 2,
        "params": m.engine.build_retry_params(first["params"], answers, state),
    }
    stolen = (await post(port, retry, bob)).json()
    assert "error" in stolen, stolen
    assert stolen["error"]["code"] == m.ErrorCode.INVALID_PARAMS
    own = (await post(port, {**retry, "id": 3}, alice)).json()
    assert own["result"]["content"][0]["text"] == "confirmed"


async def test_a_second_user_cannot_see_the_first_user_s_task(
    issuer: Issuer, served: tuple[HttpServer, int]
) -> None:
    _, port = served
    alice, bob = issuer.token("alice"), issuer.token("bob")
    tasks_caps = {"elicitation": {}, "extensions": {m.tasks.TASKS_EXTENSION: {}}}
    message = call("background")
    message["params"]["_meta"][m.wire.META_CLIENT_CAPABILITIES] = tasks_caps
    created = (await post(port, message, alice)).json()["result"]
    task_id = created["task"]["taskId"] if "task" in created else created["taskId"]

    def get(rid: int) -> dict[str, Any]:
        params = {
            "taskId": task_id,
            "_meta": {**meta(), m.wire.META_CLIENT_CAPABILITIES: tasks_caps},
        }
        return {"jsonrpc": "2.0", "id": rid, "method": "tasks/get", "params": params}

    theirs = (await post(port, get(5), bob)).json()
    assert theirs["error"]["code"] == m.ErrorCode.INVALID_PARAMS
    mine = (await post(port, get(6), alice)).json()
    assert "result" in mine, mine
    # The work saw who started it (TaskContext.identity).
    with anyio.fail_after(5):
        while (await post(port, get(7), alice)).json()["result"]["status"] != "completed":
            await anyio.sleep(0.02)
    finished = (await post(port, get(8), alice)).json()["result"]
    assert "done for alice" in json.dumps(finished)


async def test_the_websocket_upgrade_needs_the_token(
    issuer: Issuer, served: tuple[HttpServer, int]
) -> None:
    _, port = served
    upgrade = [
        ("connection", "Upgrade"),
        ("upgrade", "websocket"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("sec-websocket-protocol", "mcp"),
    ]
    refused = await request(port, "GET", "/mcp", headers=upgrade)
    assert refused.status == 401
    challenge = BearerChallenge.from_headers(refused.header("www-authenticate") or "")
    assert challenge is not None and challenge.resource_metadata == METADATA_URL
    bad = await request(
        port,
        "GET",
        "/mcp",
        headers=[*upgrade, ("authorization", f"Bearer {issuer.token(exp_in=-3600)}")],
    )
    assert bad.status == 401
    good = await request(
        port, "GET", "/mcp", headers=[*upgrade, ("authorization", f"Bearer {issuer.token()}")]
    )
    assert good.status == 101


async def test_a_2025_session_belongs_to_the_principal_that_started_it(
    issuer: Issuer, served: tuple[HttpServer, int]
) -> None:
    _, port = served
    alice, bob = issuer.token("alice"), issuer.token("bob")
    base = [
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
    ]
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "old", "version": "1"},
        },
    }
    started = await request(
        port,
        "POST",
        "/mcp",
        headers=[*base, ("authorization", f"Bearer {alice}")],
        body=json.dumps(init).encode(),
    )
    assert started.status == 200, started.body
    session = started.header("mcp-session-id")
    assert session is not None
    listing = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).encode()
    session_headers = [*base, ("mcp-session-id", session), ("mcp-protocol-version", "2025-11-25")]

    async def as_user(token: str) -> int:
        headers = [*session_headers, ("authorization", f"Bearer {token}")]
        return (await request(port, "POST", "/mcp", headers=headers, body=listing)).status

    assert await as_user(bob) == 404
    assert await as_user(alice) == 200


async def answer_yes(key: str, request: Any) -> Any:
    return m.wire.ElicitResult(action="accept", content={"ok": True})


async def test_the_project_s_clients_carry_the_token(
    issuer: Issuer, served: tuple[HttpServer, int]
) -> None:
    """The HTTP client through a continuation's rounds (the resumed leg sees the
    identity), and a WebSocket conversation, where a tool's scope is the app's JSON-RPC
    refusal (-32003): no status can say it after the upgrade."""
    _, port = served
    headers = {"Authorization": f"Bearer {issuer.token('alice', scope='mcp:tools')}"}
    async with open_http_client(
        f"http://127.0.0.1:{port}/mcp", headers=headers, answer=answer_yes
    ) as client:
        result = await client.call_tool("parked", {})
        assert result["content"][0]["text"] == "alice mcp:tools"
    async with open_ws_client(f"ws://127.0.0.1:{port}/mcp", headers=headers) as ws:
        said = await ws.call_tool("whoami", {})
        assert json.loads(said["content"][0]["text"])["sub"] == "alice"
        with pytest.raises(CallError) as refused:
            await ws.call_tool("purge", {})
        assert refused.value.code == -32003
        assert refused.value.data == {"reason": "insufficient_scope", "scopes": ["admin"]}


async def test_scopes_every_request_needs_and_a_verifier_that_cannot_decide(
    issuer: Issuer, caplog: pytest.LogCaptureFixture
) -> None:
    as_app = AuthServerApp(issuer)
    async with hosting(as_app) as as_port:
        keys = JwksKeys(f"http://127.0.0.1:{as_port}/jwks", refetch_interval=0.0)
        verifier = JwtVerifier(issuer=ISSUER, audience=RESOURCE, jwks=keys)
        auth = ResourceAuth(
            verifier, resource=RESOURCE, authorization_servers=[ISSUER], scopes=["mcp:tools"]
        )
        server = HttpServer(make_app(), auth=auth)
        async with anyio.create_task_group() as tasks:
            _, port = await tasks.start(server.serve, "127.0.0.1", 0)
            try:
                without = await post(port, call("whoami"), None)
                challenge = BearerChallenge.from_headers(without.header("www-authenticate") or "")
                assert challenge is not None and challenge.scope == ("mcp:tools",)
                as_app.down = True  # no key set was fetched yet: nobody gets in
                caplog.set_level(logging.ERROR)
                token = issuer.token()
                down = await post(port, call("whoami"), token)
                assert down.status == 401
                assert "token not checked" in caplog.text and token not in caplog.text
                as_app.down = False
                narrow = await post(port, call("whoami"), issuer.token(scope="other"))
                assert narrow.status == 403
                challenge = BearerChallenge.from_headers(narrow.header("www-authenticate") or "")
                assert challenge is not None
                assert (challenge.error, challenge.scope) == ("insufficient_scope", ("mcp:tools",))
                assert (await post(port, call("whoami"), issuer.token())).status == 200
            finally:
                await server.aclose(grace=0.2)


async def test_a_websocket_conversation_ends_when_its_token_expires(
    issuer: Issuer, served: tuple[HttpServer, int]
) -> None:
    _, port = served
    # (3 s: a loaded machine has taken over a second to open the conversation and call)
    headers = {"Authorization": f"Bearer {issuer.token('alice', exp_in=3)}"}
    async with open_ws_client(f"ws://127.0.0.1:{port}/mcp", headers=headers) as ws:
        said = await ws.call_tool("whoami", {})
        assert json.loads(said["content"][0]["text"])["sub"] == "alice"
        await anyio.sleep(3.6)
        with pytest.raises(TransportError, match=r"1008 \(policy violation\): the token expired"):
            await ws.call_tool("whoami", {})


async def test_a_listen_stream_ends_when_its_token_expires(
    issuer: Issuer, served: tuple[HttpServer, int]
) -> None:
    _, port = served
    params = {"notifications": {"toolsListChanged": True}, "_meta": meta()}
    listen = {"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen", "params": params}
    started = anyio.current_time()
    with anyio.fail_after(10):
        reply = await post(port, listen, issuer.token("alice", exp_in=1))
    assert reply.status == 200
    assert anyio.current_time() - started < 5  # (the pool's lifetime is 600 s)
    ended = reply.json()
    assert ended["id"] == 9 and "result" in ended  # the graceful end: a result
