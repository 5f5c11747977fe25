"""End to end: a real OpenID provider (``oidc-provider`` on Node) issues the tokens,
``mrtr serve --http --auth-issuer ... --public-url ...`` (a real subprocess) requires them
in front of ``support.auth_e2e_app``, and people sign in with the test browser.

One provider and one server serve the whole module (a module-scoped fixture each: the
provider on a loop of its own, the server a process).  The server requires ``tools:read``
on every request (``--auth-scope``) and ``deploy`` needs ``tools:deploy`` too; it allows
no clock skew (``--auth-leeway 0``), so an expired token is refused within seconds.

What is checked: no token is 401 with the challenge naming the metadata and the scope;
the scopes each tool needs (403 ``insufficient_scope`` naming ``tools:deploy``); a second
user (bob) can neither redeem the first user's (ada's) sealed ``requestState`` nor read or
cancel her task; an expired token and a token for another server are refused; the
project's own ``Client`` with an ``OAuthProvider`` (pre-registered or registered
dynamically) runs the whole flow against the provider, the step-up to ``tools:deploy``
included; no token is in the server's log.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from authserver_kit import Reply, post
from mrtr_transports.client.http import open_http_client
from mrtr_transports.client.oauth import OAuthProvider
from support.auth_e2e import (
    Served,
    machine_tokens,
    provider_for_module,
    serving_with_tokens,
    user_tokens,
)
from support.oidc_provider import (
    DEFAULT_USERS,
    PUBLIC_CLIENT_ID,
    OidcProvider,
    User,
    default_config,
    http_request,
)

import mrtr_core as m
from mrtr_core.auth import BearerChallenge

VERSION = "2026-07-28"
USERS = {**DEFAULT_USERS, "bob": User("bob-password", {"name": "Bob"})}
#: A client credentials token lives this long (seconds): the expiry test waits it out.
MACHINE_TOKEN_TTL = 4
TASKS_CAPABILITIES = {"elicitation": {}, "extensions": {m.tasks.TASKS_EXTENSION: {}}}


@pytest.fixture(scope="module")
def provider() -> Iterator[OidcProvider]:
    config = default_config(users=USERS)
    config["ttl"]["ClientCredentials"] = MACHINE_TOKEN_TTL
    with provider_for_module(config, users=USERS) as running:
        yield running


@pytest.fixture(scope="module")
def server(provider: OidcProvider) -> Iterator[Served]:
    flags = ("--auth-scope", "tools:read", "--auth-leeway", "0", "--log-level", "INFO")
    with serving_with_tokens(provider.issuer, *flags) as served:
        yield served
        log = served.log()
    for secret in ("ada-password", "bob-password", "eyJ"):  # (every JWT starts eyJ)
        assert secret not in log, log


def meta(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        m.wire.META_PROTOCOL_VERSION: VERSION,
        m.wire.META_CLIENT_CAPABILITIES: capabilities or {"elicitation": {}},
    }


def request(
    method: str, params: dict[str, Any], rid: int = 1, **capabilities: Any
) -> dict[str, Any]:
    body = {**params, "_meta": meta(capabilities or None)}
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": body}


def call(name: str, arguments: dict[str, Any] | None = None, **capabilities: Any) -> dict[str, Any]:
    return request("tools/call", {"name": name, "arguments": arguments or {}}, **capabilities)


def text_of(reply: Reply) -> str:
    assert reply.status == 200, (reply.status, reply.body)
    result = reply.json()["result"]
    assert result.get("isError") is not True, result
    text: str = result["content"][0]["text"]
    return text


def challenge_of(reply: Reply) -> BearerChallenge:
    challenge = BearerChallenge.from_headers(reply.header("www-authenticate") or "")
    assert challenge is not None, reply.headers
    return challenge


async def token_of(provider: OidcProvider, server: Served, user: str, scope: str) -> str:
    """A person's token: ``user`` signs in, in a browser of their own, and allows."""
    browser = provider.browser()
    tokens = await user_tokens(provider, browser, user, resource=server.url, scope=scope)
    access: str = tokens["access_token"]
    return access


async def test_no_token_is_401_with_the_challenge_and_the_metadata_names_the_provider(
    provider: OidcProvider, server: Served
) -> None:
    refused = await post(server.port, call("whoami"), None)
    assert refused.status == 401
    challenge = challenge_of(refused)
    metadata_url = f"http://127.0.0.1:{server.port}/.well-known/oauth-protected-resource/mcp"
    assert challenge.resource_metadata == metadata_url
    assert challenge.scope == ("tools:read",)  # what to ask for first
    assert challenge.error is None  # no token was sent
    metadata = await http_request("GET", metadata_url)
    assert metadata.status == 200
    assert metadata.json() == {
        "resource": server.url,
        "authorization_servers": [provider.issuer],
        "scopes_supported": ["tools:read", "tools:deploy"],  # required, then the tools'
        "bearer_methods_supported": ["header"],
    }


async def test_each_tool_s_scopes(provider: OidcProvider, server: Served) -> None:
    reader = await token_of(provider, server, "ada", "tools:read")
    said = json.loads(text_of(await post(server.port, call("whoami"), reader)))
    assert said == {"sub": "ada", "client_id": PUBLIC_CLIENT_ID, "scopes": ["tools:read"]}
    scoped = await post(server.port, call("deploy"), reader)
    assert scoped.status == 403
    challenge = challenge_of(scoped)
    assert (challenge.error, challenge.scope) == ("insufficient_scope", ("tools:deploy",))
    assert "tools:deploy" in scoped.json()["error"]["message"]
    both = await token_of(provider, server, "ada", "tools:read tools:deploy")
    deployed = await post(server.port, call("deploy", {"target": "prod"}), both)
    assert text_of(deployed) == "deployed prod for ada"
    # tools:read is needed by every request (--auth-scope): tools:deploy alone is not enough
    deployer = await token_of(provider, server, "ada", "tools:deploy")
    lacking = await post(server.port, call("deploy"), deployer)
    assert lacking.status == 403
    assert challenge_of(lacking).scope == ("tools:read",)


async def test_a_token_for_another_server_is_refused(
    provider: OidcProvider, server: Served
) -> None:
    """A token ada got for another MCP server (its ``aud``) does not open this one: a
    server that received it cannot replay it here."""
    elsewhere = f"http://127.0.0.1:{server.port % 65535 + 1}/mcp"  # (another port)
    tokens = await user_tokens(
        provider, provider.browser(), "ada", resource=elsewhere, scope="tools:read"
    )
    refused = await post(server.port, call("whoami"), tokens["access_token"])
    assert refused.status == 401
    challenge = challenge_of(refused)
    assert challenge.error == "invalid_token"
    assert challenge.error_description == "the token is for another resource (aud)"


async def test_bob_cannot_redeem_ada_s_sealed_state(provider: OidcProvider, server: Served) -> None:
    ada = await token_of(provider, server, "ada", "tools:read")
    bob = await token_of(provider, server, "bob", "tools:read")
    first = call("confirm")
    asked = (await post(server.port, first, ada)).json()["result"]
    assert asked["resultType"] == "input_required", asked
    state = asked["requestState"]
    answers = {"ok": {"action": "accept", "content": {"ok": True}}}
    params = m.engine.build_retry_params(first["params"], answers, state)
    retry = {**first, "id": 2, "params": params}
    stolen = await post(server.port, retry, bob)
    # bob's token is good: what is refused is ada's state in his request
    assert stolen.status == 400, stolen.body
    error = stolen.json()["error"]
    assert error["code"] == m.ErrorCode.INVALID_PARAMS, error
    assert error["data"] == {"reason": "wrong_principal"}, error
    assert text_of(await post(server.port, {**retry, "id": 3}, ada)) == "confirmed for ada"


async def test_bob_can_neither_read_nor_cancel_ada_s_task(
    provider: OidcProvider, server: Served
) -> None:
    ada = await token_of(provider, server, "ada", "tools:read")
    bob = await token_of(provider, server, "bob", "tools:read")
    start = call("build", {"seconds": 60}, **TASKS_CAPABILITIES)
    created = (await post(server.port, start, ada)).json()["result"]
    task_id = created["task"]["taskId"] if "task" in created else created["taskId"]

    async def task_request(method: str, token: str, of: str = task_id) -> Reply:
        message = request(method, {"taskId": of}, **TASKS_CAPABILITIES)
        return await post(server.port, message, token)

    def status_of(reply: Reply) -> str:
        assert reply.status == 200, reply.body
        status: str = reply.json()["result"]["status"]
        return status

    # to bob, ada's task is a task that does not exist: the same answer as a made-up id's
    for method in ("tasks/get", "tasks/cancel"):
        theirs = await task_request(method, bob)
        unknown = await task_request(method, bob, of="no-such-task")
        assert theirs.status == unknown.status == 400, theirs.body
        error = theirs.json()["error"]
        assert error["code"] == m.ErrorCode.INVALID_PARAMS, (method, error)
        assert error == json.loads(
            json.dumps(unknown.json()["error"]).replace("no-such-task", task_id)
        )
    assert status_of(await task_request("tasks/get", ada)) == "working"  # bob cancelled nothing
    assert (await task_request("tasks/cancel", ada)).status == 200
    with anyio.fail_after(10):
        while status_of(await task_request("tasks/get", ada)) != "cancelled":
            await anyio.sleep(0.05)


async def test_an_expired_token_is_refused(provider: OidcProvider, server: Served) -> None:
    tokens = await machine_tokens(provider, resource=server.url, scope="tools:read")
    token = tokens["access_token"]
    expires_at = time.time() + tokens["expires_in"]
    # good until it expires (a client credentials token: its subject is the client)
    said = json.loads(text_of(await post(server.port, call("whoami"), token)))
    assert said["sub"] == said["client_id"] == "mcp-confidential"
    await anyio.sleep(max(0.0, expires_at - time.time()) + 1.1)
    refused = await post(server.port, call("whoami"), token)
    assert refused.status == 401
    challenge = challenge_of(refused)
    assert challenge.error == "invalid_token"
    assert "expired" in (challenge.error_description or ""), challenge


@pytest.mark.parametrize("client_id", [PUBLIC_CLIENT_ID, None], ids=["registered", "dynamic"])
async def test_our_client_runs_the_whole_flow_and_steps_up(
    provider: OidcProvider, server: Served, client_id: str | None
) -> None:
    """Pre-registered, or registered dynamically (RFC 7591: with no ``scope``, so the
    provider lets it step up to any of the resource's scopes)."""
    browser = provider.browser()
    authorizations: list[str] = []

    async def ada_in_her_browser(authorization_url: str) -> str:
        authorizations.append(authorization_url)
        return (await browser.authorize(authorization_url, user="ada")).url

    auth = OAuthProvider(
        server.url,
        user_agent=ada_in_her_browser,
        redirect_uri="http://127.0.0.1:51235/callback",
        client_id=client_id,
        offline=False,
    )

    async def confirm(key: str, asked: m.wire.InputRequest) -> Any:
        return m.wire.ElicitResult(action="accept", content={"ok": True})

    async with open_http_client(server.url, auth=auth, answer=confirm) as client:
        whoami = await client.call_tool("whoami")
        said = json.loads(whoami["content"][0]["text"])
        assert (said["sub"], said["scopes"]) == ("ada", ["tools:read"])
        # an MRTR round under a token: the retry carries ada's sealed state, ada's token
        confirmed = await client.call_tool("confirm")
        assert confirmed["content"][0]["text"] == "confirmed for ada"
        # 403 insufficient_scope: the client asks again, for both scopes, and retries
        deployed = await client.call_tool("deploy", {"target": "prod"})
        assert deployed["content"][0]["text"] == "deployed prod for ada"
    assert len(authorizations) == 2
    # both authorizations by one client: the pre-registered one, or the one registered
    registered = said["client_id"] if client_id is None else client_id
    assert (registered == PUBLIC_CLIENT_ID) == (client_id is not None)
    assert {_query(url)["client_id"] for url in authorizations} == {registered}
    scopes = [_query(url)["scope"].split() for url in authorizations]
    assert scopes == [["tools:read"], ["tools:read", "tools:deploy"]]
    assert {_query(url)["resource"] for url in authorizations} == {server.url}
    # signed in once; the provider asks a native client's consent every time
    assert [path.rsplit("/", 1)[1] for path in browser.submitted] == [
        "login",
        "consent",
        "consent",
    ]


def _query(url: str) -> dict[str, str]:
    from urllib.parse import parse_qs, urlsplit

    return {name: values[0] for name, values in parse_qs(urlsplit(url).query).items()}
