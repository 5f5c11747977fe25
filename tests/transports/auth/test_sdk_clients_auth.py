"""The official SDK clients authenticate to ``mrtr serve --http`` with tokens from the
real OpenID provider: each runs its own OAuth flow (discovery from the 401, the
authorization server's metadata, dynamic client registration, authorization code with
PKCE and ``resource``, the token request), the test browser signing ada in, then calls
a tool, and steps up to ``tools:deploy`` when the scoped tool answers 403.

* the Python SDK (``mcp`` 2.3.0, ``mcp.client.auth.OAuthClientProvider``) runs here, on
  asyncio, its redirect handler handing the authorization URL to the browser and its
  callback handler returning where the browser was sent back;
* the TypeScript SDK (``@modelcontextprotocol/client`` 2.4.0) runs
  ``tests/support/ts/oauth_client.mjs`` under Node: it prints each authorization URL,
  this test has the browser authorize it and writes the redirect back on its stdin.

One provider and one server serve the module.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import attrs
import pytest
from support.auth_e2e import Served, provider_for_module, serving_with_tokens
from support.conformance_suite import ROOT
from support.oidc_provider import PUBLIC_CLIENT_ID, OidcProvider
from support.ts_peers import PROJECT as TS_PROJECT
from support.ts_peers import node

TS_CLIENT = TS_PROJECT / "oauth_client.mjs"
#: The loopback redirect each SDK registers (dynamic registration: any port is its own).
PY_REDIRECT = "http://127.0.0.1:51240/callback"
TS_REDIRECT = "http://127.0.0.1:51241/callback"


@pytest.fixture(scope="module")
def provider() -> Iterator[OidcProvider]:
    with provider_for_module() as running:
        yield running


@pytest.fixture(scope="module")
def server(provider: OidcProvider) -> Iterator[Served]:
    with serving_with_tokens(provider.issuer, "--auth-scope", "tools:read") as served:
        yield served


def _query(url: str) -> dict[str, str]:
    return {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}


class PythonSdkRun:
    """The official Python SDK's client with its ``OAuthClientProvider``: ada's browser
    as its redirect and callback handlers; what it was sent to authorize, what it stored."""

    def __init__(self, provider: OidcProvider, server: Served) -> None:
        from mcp.client.auth import OAuthClientProvider
        from mcp.shared.auth import OAuthClientMetadata

        self.server = server
        self.browser = provider.browser()
        self.authorizations: list[str] = []
        self.redirects: list[str] = []
        self.storage = _SdkStorage()
        self.oauth = OAuthClientProvider(
            server_url=server.url,
            client_metadata=OAuthClientMetadata(
                client_name="the official Python SDK",
                redirect_uris=[PY_REDIRECT],  # type: ignore[list-item]  (pydantic parses it)
                grant_types=["authorization_code", "refresh_token"],
                token_endpoint_auth_method="none",
            ),
            storage=self.storage,
            redirect_handler=self._send_to_browser,
            callback_handler=self._back_from_browser,
        )

    async def _send_to_browser(self, authorization_url: str) -> None:
        self.authorizations.append(authorization_url)
        response = await self.browser.authorize(authorization_url, user="ada")
        self.redirects.append(response.url)

    async def _back_from_browser(self) -> Any:
        from mcp.client.auth import AuthorizationCodeResult

        params = _query(self.redirects[-1])
        assert "code" in params, "\n".join([*self.authorizations, *self.redirects])
        return AuthorizationCodeResult(
            code=params["code"], state=params.get("state"), iss=params.get("iss")
        )

    def calls(self, *calls: tuple[str, dict[str, Any]]) -> list[str]:
        """Connect, make ``calls`` (name, arguments) in order; each result's text."""
        import mcp_types as types
        from mcp.client import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        texts: list[str] = []

        async def main() -> None:
            http = create_mcp_http_client(auth=self.oauth)
            transport = streamable_http_client(self.server.url, http_client=http)
            with anyio.fail_after(60):
                async with http, Client(transport) as client:
                    for name, arguments in calls:
                        result = await client.call_tool(name, arguments)
                        assert not result.is_error, result
                        block = result.content[0]
                        assert isinstance(block, types.TextContent)
                        texts.append(block.text)

        anyio.run(main)
        return texts

    def scopes_asked(self) -> list[list[str]]:
        """Each authorization's scopes (sorted: their order says nothing)."""
        return [sorted(_query(url).get("scope", "").split()) for url in self.authorizations]


class _SdkStorage:
    """The SDK's ``TokenStorage``, in memory: its client registration and tokens."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client_info: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client_info

    async def set_client_info(self, client_info: Any) -> None:
        self.client_info = client_info


def test_the_python_sdk_registers_signs_in_and_calls(
    provider: OidcProvider, server: Served
) -> None:
    run = PythonSdkRun(provider, server)
    (whoami,) = run.calls(("whoami", {}))
    said = json.loads(whoami)
    assert (said["sub"], said["scopes"]) == ("ada", ["tools:read"])
    # registered dynamically (RFC 7591), then one authorization: the challenge's scope
    # (and offline_access, which the provider offers), for this resource
    client_id = run.storage.client_info.client_id
    assert client_id and said["client_id"] == client_id
    assert [_query(url)["client_id"] for url in run.authorizations] == [client_id]
    assert run.scopes_asked() == [["offline_access", "tools:read"]]
    assert _query(run.authorizations[0])["resource"] == server.url
    assert run.storage.tokens.refresh_token  # (offline_access granted)


def test_the_python_sdk_steps_up_to_a_tool_s_scope(provider: OidcProvider, server: Served) -> None:
    """Pre-registered as the provider's public client: the SDK registers dynamically with
    the scope of its first challenge, and an authorization server that holds a client to
    its registered scope (this one does, as RFC 7591 allows) refuses the step-up to a
    scope outside it (``invalid_scope``); a pre-registered client has no such limit."""
    from mcp.shared.auth import OAuthClientInformationFull

    run = PythonSdkRun(provider, server)
    run.storage.client_info = OAuthClientInformationFull(
        client_id=PUBLIC_CLIENT_ID,
        redirect_uris=[PY_REDIRECT],  # type: ignore[list-item]
        token_endpoint_auth_method="none",
    )
    whoami, deployed = run.calls(("whoami", {}), ("deploy", {"target": "prod"}))
    assert json.loads(whoami)["scopes"] == ["tools:read"]
    assert deployed == "deployed prod for ada"
    # the 403 named tools:deploy: asked again for it with what was granted before
    assert run.scopes_asked() == [
        ["offline_access", "tools:read"],
        ["offline_access", "tools:deploy", "tools:read"],
    ]


@attrs.frozen
class TsRun:
    records: list[dict[str, Any]]
    authorizations: list[str]

    def texts(self) -> list[str]:
        return [record["text"] for record in self.records if record["step"] == "call"]

    def scopes_asked(self) -> list[list[str]]:
        """Each authorization's scopes (sorted: their order says nothing)."""
        return [sorted(_query(url).get("scope", "").split()) for url in self.authorizations]


async def run_ts_client(
    provider: OidcProvider, server: Served, client_id: str | None, *tools: str
) -> TsRun:
    """``oauth_client.mjs`` against ``server`` (``client_id`` pre-registered, or ``None``:
    dynamic registration) calling ``tools``; ada's browser answers each authorization."""
    browser = provider.browser()
    argv = node(TS_CLIENT, server.url, TS_REDIRECT, client_id or "-", *tools)
    records: list[dict[str, Any]] = []
    authorizations: list[str] = []
    with tempfile.TemporaryFile() as stderr:
        process = await anyio.open_process(argv, cwd=ROOT, stderr=stderr)
        async with process:
            assert process.stdin is not None and process.stdout is not None
            try:
                with anyio.fail_after(60):
                    pending = b""
                    async for chunk in process.stdout:
                        *lines, pending = (pending + chunk).split(b"\n")
                        for line in lines:
                            records.append(json.loads(line))
                            if records[-1]["step"] == "authorize":
                                authorizations.append(records[-1]["url"])
                                back = await browser.authorize(records[-1]["url"], user="ada")
                                await process.stdin.send(back.url.encode() + b"\n")
                    await process.wait()
            finally:
                if process.returncode is None:
                    process.kill()
        stderr.seek(0)
        errors = stderr.read().decode(errors="replace")
    assert process.returncode == 0, (process.returncode, records, errors)
    assert records[-1] == {"step": "done"}, (records, errors)
    return TsRun(records, authorizations)


async def test_the_typescript_sdk_registers_signs_in_and_calls(
    provider: OidcProvider, server: Served
) -> None:
    run = await run_ts_client(provider, server, None, "whoami")
    (whoami,) = run.texts()
    said = json.loads(whoami)
    assert (said["sub"], said["scopes"]) == ("ada", ["tools:read"])
    assert said["client_id"] != PUBLIC_CLIENT_ID  # registered dynamically
    assert [_query(url)["client_id"] for url in run.authorizations] == [said["client_id"]]
    assert run.scopes_asked() == [["offline_access", "tools:read"]]
    assert _query(run.authorizations[0])["resource"] == server.url


async def test_the_typescript_sdk_steps_up_to_a_tool_s_scope(
    provider: OidcProvider, server: Served
) -> None:
    """Pre-registered, as the Python SDK's step-up (the same registration limit)."""
    run = await run_ts_client(
        provider, server, PUBLIC_CLIENT_ID, "whoami", 'deploy={"target": "prod"}'
    )
    whoami, deployed = run.texts()
    assert json.loads(whoami)["scopes"] == ["tools:read"]
    assert deployed == "deployed prod for ada"
    assert run.scopes_asked() == [
        ["offline_access", "tools:read"],
        ["offline_access", "tools:deploy", "tools:read"],
    ]
