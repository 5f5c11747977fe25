"""``mrtr serve --http --auth-introspection URL`` (RFC 7662): opaque tokens of the real
OpenID provider, checked at its introspection endpoint, the server authenticating there
as the provider's client ``mcp-resource-server`` (``--auth-client-id``) with the secret
``--auth-client-secret FILE|env:NAME`` names (never the secret on the command line).

One provider (opaque tokens) and one server (the secret in the environment) serve the
module; one more server reads a wrong secret from a file.  The flags' rules and the
secret's reading: ``test_serve_auth_flags.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from authserver_kit import Reply, post
from support.auth_e2e import (
    Served,
    machine_tokens,
    provider_for_module,
    serving_with_tokens,
    user_tokens,
)
from support.oidc_provider import (
    CONFIDENTIAL_CLIENT_ID,
    PUBLIC_CLIENT_ID,
    RESOURCE_SERVER_CLIENT_ID,
    OidcProvider,
    default_config,
)

import mrtr_core as m
from mrtr_core.auth import BearerChallenge

SECRET_VARIABLE = "MRTR_TEST_RESOURCE_SERVER_SECRET"
#: Every access token lives this long (seconds): each test uses its tokens at once, and
#: the expiry test waits one out.
TOKEN_TTL = 4


@pytest.fixture(scope="module")
def provider() -> Iterator[OidcProvider]:
    config = default_config(token_format="opaque", access_token_ttl=TOKEN_TTL)
    with provider_for_module(config) as running:
        yield running


def introspection_flags(provider: OidcProvider, secret_source: str) -> tuple[str, ...]:
    endpoint = str(provider.discovery["introspection_endpoint"])
    return (
        "--auth-introspection",
        endpoint,
        "--auth-client-id",
        RESOURCE_SERVER_CLIENT_ID,
        "--auth-client-secret",
        secret_source,
        "--log-level",
        "INFO",
    )


@pytest.fixture(scope="module")
def server(provider: OidcProvider) -> Iterator[Served]:
    secret = provider.client_secret(RESOURCE_SERVER_CLIENT_ID)
    flags = introspection_flags(provider, f"env:{SECRET_VARIABLE}")
    with serving_with_tokens(provider.issuer, *flags, env={SECRET_VARIABLE: secret}) as served:
        argv = Path(f"/proc/{served.pid}/cmdline").read_bytes().decode()
        assert secret not in argv and SECRET_VARIABLE in argv
        yield served
        log = served.log()
    assert secret not in log, log


def call(name: str) -> dict[str, object]:
    meta = {
        m.wire.META_PROTOCOL_VERSION: "2026-07-28",
        m.wire.META_CLIENT_CAPABILITIES: {},
    }
    params = {"name": name, "arguments": {}, "_meta": meta}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def text_of(reply: Reply) -> str:
    assert reply.status == 200, (reply.status, reply.body)
    text: str = reply.json()["result"]["content"][0]["text"]
    return text


def challenge_of(reply: Reply) -> BearerChallenge:
    challenge = BearerChallenge.from_headers(reply.header("www-authenticate") or "")
    assert challenge is not None, reply.headers
    return challenge


async def test_an_opaque_token_is_checked_at_the_provider(
    provider: OidcProvider, server: Served
) -> None:
    tokens = await user_tokens(
        provider, provider.browser(), "ada", resource=server.url, scope="tools:read"
    )
    token = tokens["access_token"]
    assert token.count(".") == 0  # opaque: no JWT to verify locally
    said = json.loads(text_of(await post(server.port, call("whoami"), token)))
    assert said == {"sub": "ada", "client_id": PUBLIC_CLIENT_ID, "scopes": ["tools:read"]}
    # the scopes the introspection answer names are the token's: the scoped tool is 403
    scoped = await post(server.port, call("deploy"), token)
    assert scoped.status == 403
    assert challenge_of(scoped).scope == ("tools:deploy",)
    assert token not in server.log()


async def test_a_machine_token_is_its_client(provider: OidcProvider, server: Served) -> None:
    # the provider's introspection answer for a client credentials token names no sub:
    # the client is the caller (RFC 9068's sub for such tokens), not a refusal
    tokens = await machine_tokens(provider, resource=server.url, scope="tools:read")
    said = json.loads(text_of(await post(server.port, call("whoami"), tokens["access_token"])))
    assert said == {
        "sub": CONFIDENTIAL_CLIENT_ID,
        "client_id": CONFIDENTIAL_CLIENT_ID,
        "scopes": ["tools:read"],
    }


async def test_no_token_and_a_made_up_one_are_401(provider: OidcProvider, server: Served) -> None:
    refused = await post(server.port, call("whoami"), None)
    assert refused.status == 401
    assert challenge_of(refused).resource_metadata == (
        f"http://127.0.0.1:{server.port}/.well-known/oauth-protected-resource/mcp"
    )
    made_up = await post(server.port, call("whoami"), "not-a-token-the-provider-issued")
    assert made_up.status == 401
    assert challenge_of(made_up).error == "invalid_token"
    assert "not active" in made_up.json()["error"]["message"]


async def test_an_expired_opaque_token_is_refused(provider: OidcProvider, server: Served) -> None:
    tokens = await user_tokens(
        provider, provider.browser(), "ada", resource=server.url, scope="tools:read"
    )
    token = tokens["access_token"]
    expires_at = time.time() + tokens["expires_in"]
    assert json.loads(text_of(await post(server.port, call("whoami"), token)))["sub"] == "ada"
    # the good answer was kept (cache_ttl), never past the token's expiry: asked again
    await anyio.sleep(max(0.0, expires_at - time.time()) + 1.1)
    refused = await post(server.port, call("whoami"), token)
    assert refused.status == 401
    assert challenge_of(refused).error == "invalid_token"


async def test_a_wrong_secret_lets_no_token_in(provider: OidcProvider, tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text("not-the-secret\n")
    secret_file.chmod(0o600)
    flags = introspection_flags(provider, str(secret_file))
    with serving_with_tokens(provider.issuer, *flags) as served:
        tokens = await user_tokens(
            provider, provider.browser(), "ada", resource=served.url, scope="tools:read"
        )
        refused = await post(served.port, call("whoami"), tokens["access_token"])
        assert refused.status == 401
        assert challenge_of(refused).error == "invalid_token"
        with anyio.fail_after(5):  # (its stderr is read by a thread)
            while "token introspection answered 401" not in served.log():
                await anyio.sleep(0.05)
        assert "not-the-secret" not in served.log()
