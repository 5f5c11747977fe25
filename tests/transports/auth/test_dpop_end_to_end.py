"""End to end with DPoP (RFC 9449): the real OpenID provider (``oidc-provider`` on Node,
its ``dpop`` feature on) binds the tokens it issues to the key of the token request's
proof, and ``mrtr serve --http --auth-issuer ... --auth-dpop required`` (a real
subprocess) takes only such tokens, each request with a proof by that key and, with
``--auth-dpop-nonces``, the nonce the server names.

What is checked: the metadata and the 401 say DPoP is required; the project's ``Client``
with ``OAuthProvider(dpop=True)`` signs ada in (the test browser) and calls a tool; a
token the provider bound to a key of the test's is accepted with that key's proof, and
refused with another key's proof, as a Bearer token, and with a proof used before; no
token is in the server's log; a server that demands its own nonces (in-process, the
same provider's tokens) makes the client sign again with the nonce it names.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import jwt
import pytest
from mrtr_transports.auth import Dpop, JwtVerifier, ResourceAuth
from mrtr_transports.client.http import open_http_client
from mrtr_transports.client.oauth import OAuthProvider
from mrtr_transports.client.ws import open_ws_client
from mrtr_transports.server.http import HttpServer
from support.auth_e2e import (
    REDIRECT_URI,
    Served,
    free_port,
    provider_for_module,
    serving_with_tokens,
)
from support.auth_e2e_app import app as e2e_app
from support.oidc_provider import (
    PUBLIC_CLIENT_ID,
    OidcProvider,
    Pkce,
    default_config,
    http_request,
)
from test_dpop_gate import Key, call, dpop_challenge, post

from mrtr_core.auth import BearerChallenge

# The real provider is a Node process (as the interop peers): ``make check`` leaves it out.
pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def provider() -> Iterator[OidcProvider]:
    with provider_for_module(default_config(dpop=True)) as running:
        yield running


@pytest.fixture(scope="module")
def server(provider: OidcProvider) -> Iterator[Served]:
    flags = ("--auth-dpop", "required", "--auth-dpop-nonces", "--log-level", "INFO")
    with serving_with_tokens(provider.issuer, *flags) as served:
        yield served
        log = served.log()
    assert "eyJ" not in log, log  # (every JWT, token or proof, starts eyJ)


async def bound_token(provider: OidcProvider, server: Served, key: Key, user: str) -> str:
    """``user``'s token for ``server``, the token request proving ``key`` (the provider
    binds the token to it)."""
    pkce = Pkce.new()
    url = provider.authorization_url(
        redirect_uri=REDIRECT_URI, scope="tools:read", resource=server.url, pkce=pkce, state="d"
    )
    response = await provider.browser().authorize(url, user=user)
    assert response.code, response
    form = {
        "grant_type": "authorization_code",
        "code": response.code,
        "redirect_uri": REDIRECT_URI,
        "client_id": PUBLIC_CLIENT_ID,
        "code_verifier": pkce.verifier,
        "resource": server.url,
    }
    proof = key.proof(None, htu=provider.token_endpoint)
    redeemed = await http_request(
        "POST", provider.token_endpoint, form=form, headers={"DPoP": proof}
    )
    assert redeemed.status == 200, redeemed
    tokens: dict[str, Any] = redeemed.json()
    assert tokens["token_type"] == "DPoP"
    access: str = tokens["access_token"]
    claims = jwt.decode(access, options={"verify_signature": False})
    assert claims["cnf"] == {"jkt": key.thumbprint}
    return access


async def test_the_metadata_and_the_401_say_dpop_is_required(server: Served) -> None:
    metadata_url = f"http://127.0.0.1:{server.port}/.well-known/oauth-protected-resource/mcp"
    document = (await http_request("GET", metadata_url)).json()
    assert document["dpop_signing_alg_values_supported"] == ["ES256", "RS256", "PS256", "EdDSA"]
    assert document["dpop_bound_access_tokens_required"] is True
    refused = await post(server.port, None)
    assert refused.status == 401
    assert BearerChallenge.from_headers(refused.header("www-authenticate") or "") is None
    assert dpop_challenge(refused).resource_metadata == metadata_url


async def test_our_client_signs_in_with_dpop_and_calls_a_tool(
    provider: OidcProvider, server: Served
) -> None:
    browser = provider.browser()

    async def ada_in_her_browser(authorization_url: str) -> str:
        return (await browser.authorize(authorization_url, user="ada")).url

    auth = OAuthProvider(
        server.url,
        user_agent=ada_in_her_browser,
        redirect_uri="http://127.0.0.1:51236/callback",
        client_id=PUBLIC_CLIENT_ID,
        offline=False,
        dpop=True,
    )
    async with open_http_client(server.url, auth=auth) as client:
        for _ in range(2):  # (a fresh proof each request: a replayed one would be refused)
            whoami = await client.call_tool("whoami")
            said = json.loads(whoami["content"][0]["text"])
            assert said["sub"] == "ada"
    # (the server takes DPoP tokens only: the call itself shows the token was bound)
    # The WebSocket upgrade, with the same token and key: its proof is GET at the http URL.
    ws_url = server.url.replace("http://", "ws://", 1)
    async with open_ws_client(ws_url, auth=auth) as ws:
        said = json.loads((await ws.call_tool("whoami", {}))["content"][0]["text"])
        assert said["sub"] == "ada"
    assert [path.rsplit("/", 1)[1] for path in browser.submitted] == ["login", "consent"]


async def test_a_bound_token_is_good_with_its_keys_proof_only(
    provider: OidcProvider, server: Served
) -> None:
    key = Key()
    token = await bound_token(provider, server, key, "ada")
    # The server demands its nonce (--auth-dpop-nonces): the first proof learns it.
    asked = await post(server.port, token, (key.proof(token, htu=server.url),))
    assert asked.status == 401
    assert dpop_challenge(asked).error == "use_dpop_nonce"
    nonce = asked.header("dpop-nonce")
    assert nonce
    proof = key.proof(token, htu=server.url, nonce=nonce)
    accepted = await post(server.port, token, (proof,), message=call())
    assert accepted.status == 200, accepted.body
    assert json.loads(accepted.json()["result"]["content"][0]["text"])["sub"] == "ada"
    # Another key's proof: whoever copied the token does not hold ada's key.
    stolen = await post(server.port, token, (Key().proof(token, htu=server.url, nonce=nonce),))
    assert stolen.status == 401
    assert dpop_challenge(stolen).error == "invalid_dpop_proof"
    # The token alone, as a bearer token; and the proof used a second time.
    assert (await post(server.port, token, scheme="Bearer")).status == 401
    replayed = await post(server.port, token, (proof,))
    assert replayed.status == 401
    assert "used before" in replayed.json()["error"]["message"]


async def test_our_client_signs_again_with_the_nonce_a_server_names(
    provider: OidcProvider,
) -> None:
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    verifier = JwtVerifier(
        issuer=provider.issuer, audience=resource, jwks=str(provider.discovery["jwks_uri"])
    )
    dpop = Dpop(required=True, nonces=True)
    auth = ResourceAuth(
        verifier,
        resource=resource,
        authorization_servers=[provider.issuer],
        scopes_supported=["tools:read"],
        dpop=dpop,
    )
    server = HttpServer(e2e_app, auth=auth)
    browser = provider.browser()

    async def ada_in_her_browser(authorization_url: str) -> str:
        return (await browser.authorize(authorization_url, user="ada")).url

    client_auth = OAuthProvider(
        resource,
        user_agent=ada_in_her_browser,
        redirect_uri="http://127.0.0.1:51237/callback",
        client_id=PUBLIC_CLIENT_ID,
        offline=False,
        dpop=True,
    )
    async with anyio.create_task_group() as tasks:
        await tasks.start(server.serve, "127.0.0.1", port)
        try:
            async with open_http_client(resource, auth=client_auth) as client:
                for _ in range(2):  # (the second request's proof carries the nonce at once)
                    whoami = await client.call_tool("whoami")
                    assert json.loads(whoami["content"][0]["text"])["sub"] == "ada"
        finally:
            await server.aclose(grace=0.2)
    assert [path.rsplit("/", 1)[1] for path in browser.submitted] == ["login", "consent"]
