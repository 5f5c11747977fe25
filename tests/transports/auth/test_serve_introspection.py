"""``mrtr serve --http --auth-introspection URL`` (RFC 7662): opaque tokens of the real
OpenID provider, checked at its introspection endpoint, the server authenticating there
as the provider's client ``mcp-resource-server`` (``--auth-client-id``) with the secret
``--auth-client-secret FILE|env:NAME`` names (never the secret on the command line).

One provider (opaque tokens) and one server (the secret in the environment) serve the
module; one more server reads a wrong secret from a file.  The flags' rules and the
secret's reading are checked in-process.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from authserver_kit import Reply, post
from mrtr_transports.cli.serve_auth import read_client_secret
from mrtr_transports.cli.serve_options import ServeOptions, UsageError, add_arguments
from support.auth_e2e import (
    Served,
    provider_for_module,
    serving_with_tokens,
    user_tokens,
)
from support.oidc_provider import (
    PUBLIC_CLIENT_ID,
    RESOURCE_SERVER_CLIENT_ID,
    OidcProvider,
    default_config,
)

import mrtr_core as m
from mrtr_core.auth import BearerChallenge

pytestmark = [pytest.mark.interop, pytest.mark.subprocess]

SECRET_VARIABLE = "MRTR_TEST_RESOURCE_SERVER_SECRET"
#: Every access token lives this long (seconds): each test uses its tokens at once, and
#: the expiry test waits one out.  (The provider's client credentials tokens would not
#: do: their introspection answer names no ``sub``, which the verifier requires.)
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


def options(*flags: str) -> ServeOptions:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return ServeOptions.from_args(parser.parse_args(["--http", "127.0.0.1:0", *flags]))


AS = "https://as.example.test"
RS = "https://mcp.example.test/mcp"
INTROSPECT = ("--auth-introspection", f"{AS}/introspect")


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (INTROSPECT, "needs --auth-client-id and --auth-client-secret"),
        (
            (*INTROSPECT, "--auth-client-id", "rs"),
            "needs --auth-client-id and --auth-client-secret",
        ),
        (("--auth-client-id", "rs"), "need --auth-introspection"),
        (("--auth-client-secret", "env:X"), "need --auth-introspection"),
        (
            (*INTROSPECT, "--auth-jwks", f"{AS}/jwks", "--auth-client-id", "rs"),
            "checked one way",
        ),
        (("--auth-introspection", "as.example/introspect"), "absolute http(s) URL"),
        (("--auth-scope", "two scopes"), "one scope token"),
        (("--auth-leeway", "301"), "0 to 300 seconds"),
        (("--auth-leeway", "nan"), "0 to 300 seconds"),
        (("--auth-leeway", "-1"), "0 to 300 seconds"),
    ],
)
def test_the_introspection_flags_rules(flags: tuple[str, ...], says: str) -> None:
    with pytest.raises(UsageError, match=re.escape(says)):
        options("--auth-issuer", AS, "--auth-audience", RS, *flags)


def test_the_options_and_what_they_build(tmp_path: Path) -> None:
    from mrtr_transports.apps.mcp_app import McpApp
    from mrtr_transports.auth import IntrospectionVerifier, JwtVerifier

    secret_file = tmp_path / "secret"
    secret_file.write_text("s3cret\n")
    given = options(
        "--auth-issuer",
        AS,
        "--auth-audience",
        RS,
        *INTROSPECT,
        "--auth-client-id",
        "rs",
        "--auth-client-secret",
        str(secret_file),
        "--auth-scope",
        "read",
        "--auth-scope",
        "read",
        "--auth-leeway",
        "5",
    )
    auth = given.auth
    assert auth is not None
    assert (auth.client_id, auth.client_secret, auth.scopes, auth.leeway) == (
        "rs",
        "s3cret",
        ("read",),
        5.0,
    )
    assert "s3cret" not in repr(given)  # options get logged and shown in tracebacks
    app = McpApp("scoped", "1.0")

    @app.tool(scopes=["admin", "read"])
    def purge() -> str:
        return "purged"

    built = auth.resource_auth(app)
    assert isinstance(built.verifier, IntrospectionVerifier)
    assert (built.verifier.endpoint, built.verifier.leeway) == (f"{AS}/introspect", 5.0)
    assert built.scopes == ("read",)
    assert built.metadata.scopes_supported == ("read", "admin")
    jwt = options("--auth-issuer", AS, "--public-url", RS).auth
    assert jwt is not None and jwt.audience == RS
    plain = jwt.resource_auth(McpApp("plain", "1.0"))
    assert isinstance(plain.verifier, JwtVerifier) and plain.verifier.leeway == 60
    assert plain.metadata.scopes_supported is None and plain.scopes == ()


def test_reading_the_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_VARIABLE, "  from-the-environment\n")
    assert read_client_secret(f"env:{SECRET_VARIABLE}") == "from-the-environment"
    monkeypatch.delenv(SECRET_VARIABLE)
    with pytest.raises(UsageError, match="is not set"):
        read_client_secret(f"env:{SECRET_VARIABLE}")
    cases = {
        "empty": (b"\n", "one line"),
        "two-lines": (b"first-secret\nsecond\n", "one line"),
        "huge": (b"x" * 5000, "not a secret"),
        "binary": (b"\xff\xfe", "not UTF-8"),
    }
    for name, (content, says) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(UsageError, match=says) as refused:
            read_client_secret(str(path))
        assert "first-secret" not in str(refused.value)  # never quoted
    with pytest.raises(UsageError, match="cannot read it"):
        read_client_secret(str(tmp_path / "missing"))
    good = tmp_path / "good"
    good.write_text("from-a-file\n")
    assert read_client_secret(str(good)) == "from-a-file"
    assert os.environ.get(SECRET_VARIABLE) is None
