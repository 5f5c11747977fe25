"""The OAuth provider (``mrtr_transports.client.oauth``), and the HTTP link using it,
against real HTTP servers on 127.0.0.1: a scripted resource and authorization server
(h11 on anyio sockets) and a peer MCP endpoint that wants a Bearer token, each
recording every request, so a test can say both what the client refused and that no
code or token went anywhere it should not.  The suite's mock servers run the same
flows through the conformance scenarios (``test_conformance_client_auth.py``)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import h11
import pytest
import support.peer_http_server as peer
import trio
from mrtr_transports.client.errors import TransportError
from mrtr_transports.client.http import open_http_client
from mrtr_transports.client.oauth import (
    AuthorizationFailed,
    FetchFailed,
    FileTokenStore,
    MemoryTokenStore,
    OAuthProvider,
    headless_user_agent,
)
from mrtr_transports.client.oauth.fetch import fetch

from mrtr_core.auth import BearerChallenge, ClientCredentials, Tokens
from mrtr_core.auth._client import MAX_AUTHORIZATIONS_PER_REQUEST, pkce_challenge

REDIRECT = "http://127.0.0.1:9/callback"
Reply = tuple[int, list[tuple[str, str]], bytes]


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def form(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(self.body.decode()).items()}


@dataclass
class Server:
    """Routes by path; each handler gets the request and returns (status, headers, body)."""

    routes: dict[str, Callable[[Seen], Awaitable[Reply]]] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)
    base: str = ""

    def paths(self) -> list[str]:
        return [s.path for s in self.seen]

    async def handle(self, stream: Any) -> None:
        conn = h11.Connection(h11.SERVER)
        request: Any = None
        body = b""
        async with stream:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    try:
                        conn.receive_data(await stream.receive(65536))
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        return
                    continue
                if isinstance(event, h11.Request):
                    request = event
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
            parts = urlsplit(request.target.decode())
            seen = Seen(
                request.method.decode(),
                parts.path,
                {k: v[0] for k, v in parse_qs(parts.query).items()},
                {k.decode(): v.decode() for k, v in request.headers},
                body,
            )
            self.seen.append(seen)
            route = self.routes.get(parts.path)
            status, headers, payload = (404, [], b"") if route is None else await route(seen)
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.send(
                    conn.send(
                        h11.Response(
                            status_code=status,
                            headers=[*headers, ("Content-Length", str(len(payload)))],
                        )
                    )
                    + conn.send(h11.Data(data=payload))
                    + conn.send(h11.EndOfMessage())
                )


def json_reply(value: Any, status: int = 200) -> Reply:
    return status, [("Content-Type", "application/json")], json.dumps(value).encode()


@asynccontextmanager
async def serving(server: Server):
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    server.base = f"http://127.0.0.1:{port}"
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, server.handle)
        try:
            yield server
        finally:
            tg.cancel_scope.cancel()


def oauth_server(**overrides: Any) -> Server:
    """A resource at /mcp and its authorization server at the root, as the spec has them."""
    server = Server()

    async def prm(seen: Seen) -> Reply:
        return json_reply(
            overrides.get("prm")
            or {
                "resource": f"{server.base}/mcp",
                "authorization_servers": [server.base],
                "scopes_supported": ["files:read"],
            }
        )

    async def as_metadata(seen: Seen) -> Reply:
        return json_reply(
            {
                "issuer": overrides.get("issuer", server.base),
                "authorization_endpoint": f"{server.base}/authorize",
                "token_endpoint": f"{server.base}/token",
                "registration_endpoint": f"{server.base}/register",
                "scopes_supported": ["files:read", "files:write", "offline_access"],
                "authorization_response_iss_parameter_supported": True,
            }
        )

    async def register(seen: Seen) -> Reply:
        return json_reply({"client_id": "dyn-client"}, 201)

    async def authorize(seen: Seen) -> Reply:
        target = seen.query["redirect_uri"]
        location = f"{target}?code=the-code&state={seen.query['state']}&iss={server.base}"
        return 302, [("Location", location)], b""

    counter = iter(range(1, 100))

    async def token(seen: Seen) -> Reply:
        form = seen.form()
        if form["grant_type"] == "authorization_code":
            assert pkce_challenge(form["code_verifier"]) == authorize_seen(server)["code_challenge"]
        n = next(counter)
        return json_reply(
            overrides.get("token")
            or {
                "access_token": f"access-{n}",
                "token_type": "Bearer",
                "expires_in": 3600,
                "refresh_token": f"refresh-{n}",
            }
        )

    server.routes.update(
        {
            "/.well-known/oauth-protected-resource/mcp": overrides.get("prm_route", prm),
            "/.well-known/oauth-authorization-server": as_metadata,
            "/register": register,
            "/authorize": authorize,
            "/token": token,
        }
    )
    return server


def authorize_seen(server: Server) -> dict[str, str]:
    return [s for s in server.seen if s.path == "/authorize"][-1].query


def provider(server: Server, **options: Any) -> OAuthProvider:
    options.setdefault("user_agent", headless_user_agent)
    return OAuthProvider(f"{server.base}/mcp", redirect_uri=REDIRECT, **options)


def challenge(server: Server, **fields: Any) -> list[str]:
    prm = f"{server.base}/.well-known/oauth-protected-resource/mcp"
    return [BearerChallenge(resource_metadata=prm, **fields).to_header()]


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_a_401_runs_the_flow_and_the_token_is_presented():
    async with serving(oauth_server()) as server:
        auth = provider(server)
        assert await auth.authorization() is None
        assert await auth.challenged(401, challenge(server), None)
        assert await auth.authorization() == ("Authorization", "Bearer access-1")
        assert server.paths() == [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-authorization-server",
            "/register",
            "/authorize",
            "/token",
        ]
        query = authorize_seen(server)
        assert query["resource"] == f"{server.base}/mcp"
        assert query["scope"] == "files:read offline_access"
        assert query["code_challenge_method"] == "S256"
        form = server.seen[-1].form()
        assert form["resource"] == f"{server.base}/mcp" and form["client_id"] == "dyn-client"
        # metadata, registration and the token endpoint never see a bearer token
        assert all("authorization" not in s.headers for s in server.seen)
        assert "access-1" not in repr(auth) and "access-1" not in repr(auth.store)


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_a_request_that_saw_an_older_token_just_goes_again():
    async with serving(oauth_server()) as server:
        auth = provider(server)
        assert await auth.challenged(401, challenge(server), None)
        count = len(server.seen)
        assert await auth.challenged(401, challenge(server), None)  # (raced the first)
        assert len(server.seen) == count


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_step_up_keeps_the_granted_scopes():
    async with serving(oauth_server()) as server:
        auth = provider(server)
        await auth.challenged(401, challenge(server), None)
        sent = await auth.authorization()
        more = challenge(server, error="insufficient_scope", scope=("files:write",))
        assert await auth.challenged(403, more, sent)
        assert authorize_seen(server)["scope"] == "files:read offline_access files:write"
        assert await auth.authorization() == ("Authorization", "Bearer access-2")
        assert auth.authorizations == 2
        # a 403 for another reason: no new token would help
        assert not await auth.challenged(403, challenge(server, error="invalid_request"), sent)


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_a_step_up_in_a_new_process_keeps_the_scopes_stored_with_the_token(tmp_path):
    path = tmp_path / "tokens.json"
    async with serving(oauth_server()) as server:
        first = provider(server, store=FileTokenStore(path))
        await first.challenged(401, challenge(server), None)
        # (the token response names no scope: granted as requested, RFC 6749 5.1)
        [granted] = FileTokenStore(path).entries().tokens.values()
        assert granted.scopes == ("files:read", "offline_access")
        # a new process: the stored token, then a 403 for more
        later = provider(server, store=FileTokenStore(path))
        assert await later.challenged(401, challenge(server), None)
        sent = await later.authorization()
        more = challenge(server, error="insufficient_scope", scope=("files:write",))
        assert await later.challenged(403, more, sent)
        assert authorize_seen(server)["scope"] == "files:read offline_access files:write"
        [stepped] = FileTokenStore(path).entries().tokens.values()
        assert stepped.scopes == ("files:read", "offline_access", "files:write")


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_granted_scopes_are_the_servers_when_it_names_them_and_survive_a_refresh():
    now = [1000.0]
    answer = {"access_token": "a", "token_type": "Bearer", "expires_in": 60}
    answer |= {"refresh_token": "r", "scope": "files:read"}
    async with serving(oauth_server(token=answer)) as server:
        auth = provider(server, clock=lambda: now[0])
        await auth.challenged(401, challenge(server), None)
        key = (f"{server.base}/mcp", server.base)
        assert (await auth.store.tokens(*key)).scopes == ("files:read",)  # not offline_access
        server.routes["/token"] = lambda seen: _json({"access_token": "b", "token_type": "Bearer"})
        now[0] += 3600
        assert await auth.authorization() == ("Authorization", "Bearer b")
        refreshed = await auth.store.tokens(*key)
        assert refreshed.scopes == ("files:read",) and refreshed.refresh_token == "r"


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_an_expired_token_is_refreshed_before_use():
    now = [1000.0]
    async with serving(oauth_server()) as server:
        auth = provider(server, clock=lambda: now[0])
        await auth.challenged(401, challenge(server), None)
        now[0] += 3600
        assert await auth.authorization() == ("Authorization", "Bearer access-2")
        refresh = server.seen[-1].form()
        assert refresh["grant_type"] == "refresh_token" and refresh["refresh_token"] == "refresh-1"
        assert refresh["resource"] == f"{server.base}/mcp"
        assert auth.authorizations == 1


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (
            {
                "prm": {
                    "resource": "https://evil.example.com/mcp",
                    "authorization_servers": ["https://evil.example.com"],
                }
            },
            "is for the resource",
        ),
        ({"issuer": "https://attacker.example.com"}, "is not"),
    ],
)
async def test_metadata_for_another_identity_is_refused(overrides, match):
    async with serving(oauth_server(**overrides)) as server:
        auth = provider(server)
        with pytest.raises(AuthorizationFailed, match=match):
            await auth.challenged(401, challenge(server), None)
        assert not {"/register", "/authorize", "/token"} & set(server.paths())
        assert await auth.authorization() is None


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_a_redirect_to_an_unregistered_uri_is_refused_and_no_code_is_sent():
    async def elsewhere(url: str) -> str:
        await headless_user_agent(url)
        return "https://evil.example.com/callback?code=the-code&state=x"

    async with serving(oauth_server()) as server:
        auth = provider(server, user_agent=elsewhere)
        with pytest.raises(AuthorizationFailed, match="another URI"):
            await auth.challenged(401, challenge(server), None)
        assert "/token" not in server.paths()


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_oversized_and_slow_metadata_are_refused():
    async def huge(seen: Seen) -> Reply:
        return json_reply({"resource": "x" * 300_000})

    async def slow(seen: Seen) -> Reply:
        await anyio.sleep(5)
        return json_reply({})

    for route, options, match in [
        (huge, {}, "passed 262144 bytes"),
        (slow, {"timeout": 0.3}, "took more than 0.3 s"),
    ]:
        async with serving(oauth_server(prm_route=route)) as server:
            auth = provider(server, **options)
            with pytest.raises(AuthorizationFailed, match=match):
                await auth.challenged(401, challenge(server), None)
            assert "/authorize" not in server.paths()


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_a_token_error_is_refused_without_quoting_secrets():
    token = {"error": "invalid_grant", "error_description": "code used"}
    async with serving(oauth_server(token=token)) as server:
        auth = provider(server, client_id="pre", client_secret="hunter2")
        with pytest.raises(AuthorizationFailed) as caught:
            await auth.challenged(401, challenge(server), None)
        assert "invalid_grant" in str(caught.value) and "code used" in str(caught.value)
        assert "hunter2" not in str(caught.value) and "the-code" not in str(caught.value)
        assert "/register" not in server.paths()  # pre-registered: no registration
        assert server.seen[-1].headers["authorization"].startswith("Basic ")


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_fetch_follows_no_redirect_and_names_no_query():
    async def moved(seen: Seen) -> Reply:
        return 302, [("Location", "http://127.0.0.1:9/elsewhere")], b""

    server = Server(routes={"/moved": moved})
    async with serving(server):
        fetched = await fetch(f"{server.base}/moved?code=secret")
        assert fetched.status == 302 and fetched.header("location").endswith("/elsewhere")
        with pytest.raises(FetchFailed) as caught:
            await fetch("http://127.0.0.1:9/x?code=secret", timeout=2)
        assert "secret" not in str(caught.value)


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_file_store_is_owner_only_and_round_trips(tmp_path):
    path = tmp_path / "state" / "tokens.json"
    store = FileTokenStore(path)
    tokens = Tokens(access_token="at", expires_at=5.0, refresh_token="rt", scopes=("a",))
    await store.save_tokens("https://r/mcp", "https://as", tokens)
    await store.save_client("https://as", ClientCredentials(client_id="c", client_secret="s"))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = FileTokenStore(path)
    assert await again.tokens("https://r/mcp", "https://as") == tokens
    assert await again.tokens("https://r/mcp", "https://other") is None
    assert (await again.client("https://as")) == ClientCredentials(client_id="c", client_secret="s")
    assert await again.client("https://other") is None
    await again.save_tokens("https://r/mcp", "https://as", None)
    assert await again.tokens("https://r/mcp", "https://as") is None
    assert repr(again) == f"FileTokenStore({str(path)!r})"  # (no token in it)


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_memory_store_keys_by_resource_and_issuer():
    store = MemoryTokenStore()
    tokens = Tokens(access_token="at")
    await store.save_tokens("r", "as1", tokens)
    assert await store.tokens("r", "as1") == tokens
    assert await store.tokens("r", "as2") is None
    await store.save_tokens("r", "as1", None)
    assert await store.tokens("r", "as1") is None
    assert repr(store) == "MemoryTokenStore(0 tokens)"


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
@pytest.mark.parametrize("kind", ["memory", "file"])
async def test_a_store_lists_forgets_and_clears_what_it_holds(tmp_path, kind):
    store = MemoryTokenStore() if kind == "memory" else FileTokenStore(tmp_path / "t.json")
    assert store.entries() == ({}, {})
    notes = Tokens(access_token="at1", expires_at=5.0, refresh_token="rt1", scopes=("a", "b"))
    mail = Tokens(access_token="at2")
    await store.save_tokens("https://notes/mcp", "https://as1", notes)
    await store.save_tokens("https://mail/mcp", "https://as1", mail)
    client = ClientCredentials(client_id="c1", client_secret="s1")
    await store.save_client("https://as1", client)
    held = store.entries()
    assert held.tokens == {
        ("https://notes/mcp", "https://as1"): notes,
        ("https://mail/mcp", "https://as1"): mail,
    }
    assert held.clients == {"https://as1": client}
    seen: list[tuple[str, str]] = []

    def notes_only(resource: str, issuer: str) -> bool:
        seen.append((resource, issuer))
        return resource == "https://notes/mcp"

    assert store.forget(notes_only) == 1
    assert sorted(seen) == [
        ("https://mail/mcp", "https://as1"),
        ("https://notes/mcp", "https://as1"),
    ]
    assert await store.tokens("https://notes/mcp", "https://as1") is None
    assert await store.tokens("https://mail/mcp", "https://as1") == mail
    assert store.forget(notes_only) == 0
    assert await store.client("https://as1") == client  # (registrations are not tokens)
    store.clear()
    assert store.entries() == ({}, {})
    assert await store.client("https://as1") is None
    if isinstance(store, FileTokenStore):
        assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600


@pytest.mark.parametrize(
    "text",
    [
        "[1, 2]",
        "{not json",
        '{"tokens": {"x": {}}}',
        '{"tokens": {"[1, 2]": {"access_token": "a"}}}',
        '{"tokens": [], "clients": {}}',
        '{"clients": {"https://as": {}}}',
    ],
)
def test_a_file_that_is_no_token_store_is_refused_and_left_alone(tmp_path, text):
    path = tmp_path / "tokens.json"
    path.write_text(text)
    store = FileTokenStore(path)
    with pytest.raises(ValueError):
        store.entries()
    with pytest.raises(ValueError):
        store.forget(lambda resource, issuer: True)
    assert path.read_text() == text


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_a_later_run_reuses_the_stored_token(tmp_path):
    store = FileTokenStore(tmp_path / "tokens.json")
    async with serving(oauth_server()) as server:
        first = provider(server, store=store)
        await first.challenged(401, challenge(server), None)
        # a new process: its first request goes without a token and gets a 401
        later = provider(server, store=FileTokenStore(tmp_path / "tokens.json"))
        assert await later.challenged(401, challenge(server), None)
        assert await later.authorization() == ("Authorization", "Bearer access-1")
        assert later.authorizations == 0
        assert server.paths().count("/authorize") == 1 and server.paths().count("/token") == 1


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_a_refused_token_is_refreshed_once_then_authorized_again():
    async with serving(oauth_server()) as server:
        auth = provider(server)
        await auth.challenged(401, challenge(server), None)
        sent = await auth.authorization()
        assert await auth.challenged(401, challenge(server), sent)  # refused: refresh
        assert server.seen[-1].form()["grant_type"] == "refresh_token"
        assert auth.authorizations == 1
        refreshed = await auth.authorization()
        assert refreshed == ("Authorization", "Bearer access-2")
        assert await auth.challenged(401, challenge(server), refreshed)  # refused again
        assert auth.authorizations == 2  # a new authorization, not another refresh
        assert server.seen[-1].form()["grant_type"] == "authorization_code"


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_a_later_run_refreshes_an_expired_stored_token_instead_of_signing_in(tmp_path):
    now = [1000.0]
    store = FileTokenStore(tmp_path / "tokens.json")
    async with serving(oauth_server()) as server:
        first = provider(server, store=store, clock=lambda: now[0])
        await first.challenged(401, challenge(server), None)
        now[0] += 7200  # the stored token expired meanwhile (it has a refresh token)
        # a new process: its first request goes without a token (``sent`` None), 401
        later = provider(
            server, store=FileTokenStore(tmp_path / "tokens.json"), clock=lambda: now[0]
        )
        assert await later.challenged(401, challenge(server), None)
        assert later.authorizations == 0  # refreshed, no new sign-in
        assert server.seen[-1].form()["grant_type"] == "refresh_token"
        assert await later.authorization() == ("Authorization", "Bearer access-2")
        assert server.paths().count("/authorize") == 1


# --- The HTTP link with the provider (trio: the peer MCP server is trio's) -------------


def guarded_mcp(oauth: Server, *, required: str = "files:read", forever_403: bool = False):
    """An MCP endpoint (``PeerHttpServer``) that wants a Bearer token: 401 without one,
    403 ``insufficient_scope`` for ``tools/call`` until a token of the second
    authorization comes (or ever, with ``forever_403``)."""

    async def handler(seen: peer.Seen) -> peer.Reply:
        prm = f"{oauth.base}/.well-known/oauth-protected-resource/mcp"
        token = seen.headers.get("authorization", "")
        if not token.startswith("Bearer "):
            header = BearerChallenge(resource_metadata=prm, scope=(required,)).to_header()
            return peer.Reply(401, [("WWW-Authenticate", header)], [b""])
        if seen.rpc_method == "tools/call" and (forever_403 or token == "Bearer access-1"):
            header = BearerChallenge(
                resource_metadata=prm, scope=("files:write",), error="insufficient_scope"
            ).to_header()
            return peer.Reply(403, [("WWW-Authenticate", header)], [b""])
        if seen.rpc_method == "server/discover":
            return peer.json_reply(peer.result(seen, peer.DISCOVER))
        if seen.rpc_method == "tools/list":
            return peer.json_reply(
                peer.result(seen, {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]})
            )
        return peer.json_reply(
            peer.result(seen, {"content": [{"type": "text", "text": token[7:]}]})
        )

    return handler


@asynccontextmanager
async def guarded(**options: Any):
    """The OAuth server and the MCP endpoint whose metadata names it, both on 127.0.0.1."""
    oauth = oauth_server()
    mcp = peer.PeerHttpServer(guarded_mcp(oauth, **options))
    async with serving(oauth), trio.open_nursery() as nursery:
        url = await nursery.start(mcp.run)
        oauth_prm = {"resource": url, "authorization_servers": [oauth.base]}
        oauth.routes["/.well-known/oauth-protected-resource/mcp"] = lambda seen: _json(oauth_prm)
        yield oauth, mcp, url
        nursery.cancel_scope.cancel()


async def _json(value: Any) -> Reply:
    return json_reply(value)


async def test_the_link_authorizes_on_401_and_steps_up_on_403():
    with trio.fail_after(10):
        async with guarded() as (oauth, mcp, url):
            auth = OAuthProvider(url, user_agent=headless_user_agent, redirect_uri=REDIRECT)
            async with open_http_client(url, auth=auth) as client:
                assert [t["name"] for t in await client.list_tools()] == ["t"]
                answer = await client.call_tool("t", {})
            assert answer["content"][0]["text"] == "access-2"  # the stepped-up token
            assert auth.authorizations == 2
            assert authorize_seen(oauth)["scope"] == "files:read offline_access files:write"
            # the MCP endpoint saw the tokens; the OAuth server never saw one
            assert {s.headers.get("authorization") for s in mcp.seen} >= {
                None,
                "Bearer access-1",
                "Bearer access-2",
            }
            assert all(
                "bearer" not in s.headers.get("authorization", "").lower() for s in oauth.seen
            )


async def test_the_link_stops_after_three_authorizations():
    with trio.fail_after(10):
        async with guarded(forever_403=True) as (_, mcp, url):
            auth = OAuthProvider(url, user_agent=headless_user_agent, redirect_uri=REDIRECT)
            async with open_http_client(url, auth=auth) as client:
                await client.list_tools()
                with pytest.raises(TransportError) as caught:
                    await client.call_tool("t", {})
            assert caught.value.status == 403
            # one for the first request's 401, then the call's own three step-ups
            assert auth.authorizations == 1 + MAX_AUTHORIZATIONS_PER_REQUEST
            calls = [s for s in mcp.seen if s.rpc_method == "tools/call"]
            assert len(calls) == 1 + MAX_AUTHORIZATIONS_PER_REQUEST
            assert "access-" not in str(caught.value)


async def test_a_refused_authorization_fails_the_request_and_sends_no_code():
    async def elsewhere(url: str) -> str:
        await headless_user_agent(url)
        return "https://evil.example.com/callback?code=the-code&state=x"

    with trio.fail_after(10):
        async with guarded() as (oauth, mcp, url):
            auth = OAuthProvider(url, user_agent=elsewhere, redirect_uri=REDIRECT)
            with pytest.raises(AuthorizationFailed, match="another URI") as caught:
                async with open_http_client(url, auth=auth) as client:
                    await client.list_tools()
            assert caught.value.status == 401
            assert "/token" not in oauth.paths()
            # final: no second attempt in another era (a 2025 initialize)
            assert oauth.paths().count("/authorize") == 1
            assert [s.rpc_method for s in mcp.seen] == ["server/discover"]
            assert all("authorization" not in s.headers for s in mcp.seen)


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_a_machine_client_uses_its_credentials_and_no_user_agent():
    async def no_person(url: str) -> str:
        raise AssertionError("a machine client has no user agent step")

    with pytest.raises(ValueError, match="client_id and client_secret"):
        OAuthProvider(
            "http://127.0.0.1:9/mcp",
            user_agent=no_person,
            redirect_uri=REDIRECT,
            client_credentials=True,
        )
    async with serving(oauth_server()) as server:
        auth = provider(
            server,
            user_agent=no_person,
            client_id="m2m",
            client_secret="s",
            client_credentials=True,
        )
        assert await auth.challenged(401, challenge(server), None)
        assert "/authorize" not in server.paths() and "/register" not in server.paths()
        form = server.seen[-1].form()
        assert form["grant_type"] == "client_credentials"
        assert form["resource"] == f"{server.base}/mcp"
        assert server.seen[-1].headers["authorization"].startswith("Basic ")
        assert await auth.authorization() == ("Authorization", "Bearer access-1")


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_a_machine_client_with_a_key_signs_a_client_assertion():
    import jwt
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    async with serving(oauth_server()) as server:
        auth = provider(server, client_id="m2m", private_key_pem=pem, client_credentials=True)
        assert await auth.challenged(401, challenge(server), None)
        form = server.seen[-1].form()
        assert (
            form["client_assertion_type"]
            == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        )
        assert "client_secret" not in form and "authorization" not in server.seen[-1].headers
        claims = jwt.decode(
            form["client_assertion"],
            key.public_key(),
            algorithms=["ES256"],
            audience=server.base,
        )
        assert (claims["iss"], claims["sub"], claims["aud"]) == ("m2m", "m2m", server.base)
        assert claims["exp"] - claims["iat"] == 60 and claims["jti"]
        assert pem not in repr(auth)
    with pytest.raises(ValueError, match="algorithm"):
        from mrtr_transports.client.oauth.assertion import sign_client_assertion

        sign_client_assertion({}, pem, "HS256")  # (no shared-secret algorithms)
    with pytest.raises(ValueError, match="needs an RSA key"):
        sign_client_assertion({}, pem, "RS256")  # (an EC key for an RSA algorithm)


async def test_no_token_code_or_secret_in_the_logs(caplog):
    caplog.set_level(logging.DEBUG)
    now = [0.0]
    with trio.fail_after(10):
        async with guarded() as (_, _mcp, url):
            auth = OAuthProvider(
                url,
                user_agent=headless_user_agent,
                redirect_uri=REDIRECT,
                client_id="pre",
                client_secret="hunter2",
                clock=lambda: now[0],
            )
            async with open_http_client(url, auth=auth) as client:
                await client.call_tool("t", {})
                now[0] += 7200  # expired: refreshed before the next request
                await client.list_tools()
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "authorizing at" in logged  # (the flow did log)
    for secret in ("access-1", "access-2", "refresh-1", "the-code", "hunter2"):
        assert secret not in logged


@pytest.mark.anyio  # (anyio code: on trio and asyncio)
async def test_a_key_that_cannot_sign_is_a_refusal_that_quotes_no_key():
    pem = "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n"
    async with serving(oauth_server()) as server:
        auth = provider(server, client_id="m2m", private_key_pem=pem, client_credentials=True)
        with pytest.raises(AuthorizationFailed, match="could not be signed") as caught:
            await auth.challenged(401, challenge(server), None)
        assert "bm90IGEga2V5" not in str(caught.value)
        assert "/token" not in server.paths()
