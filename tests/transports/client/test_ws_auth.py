"""The WebSocket client with an OAuth provider (``open_ws_client(..., auth=...)``), on real
sockets, both loops: the project's host serving ``McpAsgi(auth=ResourceAuth(...))``
with a JWT verifier, and a real OpenID provider (``support.oidc_provider``, Node's
``oidc-provider``) as the authorization server, the test acting as the user's browser.
A 401 to the upgrade runs the flow and the upgrade goes again with the token; a later
upgrade reuses the token, refreshed first when it is about to expire; a server that
never accepts a token ends the attempt after ``MAX_AUTHORIZATIONS_PER_REQUEST``."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mrtr_transports.apps.context import Context
from mrtr_transports.apps.mcp_app import McpApp
from mrtr_transports.auth import JwtVerifier, ResourceAuth
from mrtr_transports.client.errors import TransportError
from mrtr_transports.client.oauth import MemoryTokenStore, OAuthProvider
from mrtr_transports.client.ws import open_ws_client
from mrtr_transports.server.http import HttpServer
from support.oidc_provider import PUBLIC_CLIENT_ID, OidcProvider, oidc_provider

from mrtr_core.auth._client import MAX_AUTHORIZATIONS_PER_REQUEST

pytestmark = pytest.mark.anyio

#: A loopback redirect (RFC 8252): the test's browser returns it unvisited.
REDIRECT_URI = "http://127.0.0.1:54321/callback"


def make_app() -> McpApp:
    app = McpApp("ws-auth-test", "1.0")

    @app.tool
    def whoami(ctx: Context) -> str:
        """Who the token says is calling."""
        assert ctx.identity is not None
        return json.dumps({"sub": ctx.identity.subject, "scopes": sorted(ctx.identity.scopes)})

    return app


def free_port() -> int:
    # The resource's URL (the audience its tokens name) must be known before the server
    # starts: a port the kernel just handed out, then released.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def protected_server(
    provider: OidcProvider, *, audience: str | None = None
) -> AsyncIterator[str]:
    """``McpAsgi`` requiring the provider's tokens over WebSocket; its ``ws://`` URL.
    ``audience``: what the verifier wants (another resource's: every token refused)."""
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    verifier = JwtVerifier(
        issuer=provider.issuer,
        audience=audience or resource,
        jwks=str(provider.discovery["jwks_uri"]),
    )
    auth = ResourceAuth(
        verifier,
        resource=resource,
        authorization_servers=[provider.issuer],
        scopes_supported=["tools:read"],
    )
    server = HttpServer(make_app(), auth=auth)
    async with anyio.create_task_group() as tasks:
        await tasks.start(server.serve, "127.0.0.1", port)
        try:
            yield f"ws://127.0.0.1:{port}/mcp"
        finally:
            await server.aclose(grace=0.2)


class Provider(OAuthProvider):
    """The OAuth client under test, counting the refusals it was asked to answer (the
    real flow runs: ``challenged`` is the provider's own)."""

    def __init__(self, endpoint: str, provider: OidcProvider, **options: Any) -> None:
        async def browser(url: str) -> str:
            return (await provider.browser().authorize(url, user="ada")).url

        super().__init__(
            endpoint,
            user_agent=browser,
            redirect_uri=REDIRECT_URI,
            client_id=PUBLIC_CLIENT_ID,
            issuer=provider.issuer,
            **options,
        )
        self.challenges: list[int] = []

    async def challenged(
        self,
        status: int,
        www_authenticate: Sequence[str],
        sent: tuple[str, str] | None,
        **options: Any,
    ) -> bool:
        self.challenges.append(status)
        return await super().challenged(status, www_authenticate, sent, **options)


async def whoami(url: str, auth: OAuthProvider) -> dict[str, Any]:
    async with open_ws_client(url, auth=auth) as client:
        result = await client.call_tool("whoami", {})
    said: dict[str, Any] = json.loads(result["content"][0]["text"])
    return said


async def test_a_401_to_the_upgrade_runs_the_flow_then_the_token_is_reused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with oidc_provider() as provider, protected_server(provider) as url:
        auth = Provider(url, provider)
        said = await whoami(url, auth)
        assert said["sub"] == "ada" and "tools:read" in said["scopes"]
        assert auth.challenges == [401] and auth.authorizations == 1
        # A second conversation: the stored token on its first upgrade, no 401.
        assert (await whoami(url, auth))["sub"] == "ada"
        assert auth.challenges == [401] and auth.authorizations == 1
        stored = await auth.store.tokens(url.replace("ws://", "http://"), provider.issuer)
        assert stored is not None
        assert stored.access_token not in caplog.text
        assert stored.refresh_token is not None and stored.refresh_token not in caplog.text


async def test_a_token_about_to_expire_is_refreshed_before_the_upgrade() -> None:
    now = [0.0]

    def clock() -> float:
        import time

        return time.time() + now[0]

    async with oidc_provider() as provider, protected_server(provider) as url:
        store = MemoryTokenStore()
        auth = Provider(url, provider, store=store, clock=clock)
        await whoami(url, auth)
        resource = url.replace("ws://", "http://")
        first = await store.tokens(resource, provider.issuer)
        assert first is not None and first.expires_at is not None
        now[0] = first.expires_at - clock() + 1  # past its expiry, by the client's clock
        assert (await whoami(url, auth))["sub"] == "ada"
        second = await store.tokens(resource, provider.issuer)
        assert second is not None and second.access_token != first.access_token
        # Refreshed before the upgrade: no 401 met, no new authorization.
        assert auth.challenges == [401] and auth.authorizations == 1


async def test_a_server_that_refuses_every_token_ends_the_attempt_bounded() -> None:
    async with (
        oidc_provider() as provider,
        protected_server(provider, audience="http://127.0.0.1:9/other") as url,
    ):
        auth = Provider(url, provider)
        with pytest.raises(TransportError) as refused:
            await whoami(url, auth)
        assert refused.value.status == 401
        assert "refused the WebSocket (HTTP 401)" in refused.value.message
        # Three refusals answered (a flow, a refresh, a flow); the fourth stands.
        assert len(auth.challenges) == MAX_AUTHORIZATIONS_PER_REQUEST
        assert 1 <= auth.authorizations <= MAX_AUTHORIZATIONS_PER_REQUEST
        stored = await auth.store.tokens(url.replace("ws://", "http://"), provider.issuer)
        assert stored is None or stored.access_token not in refused.value.message


async def test_without_a_provider_a_401_to_the_upgrade_is_the_error() -> None:
    async with oidc_provider() as provider, protected_server(provider) as url:
        with pytest.raises(TransportError) as refused:
            async with open_ws_client(url):
                pass
        assert refused.value.status == 401 and refused.value.kind == "http"
