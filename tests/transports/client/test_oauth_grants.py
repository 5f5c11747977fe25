"""The JWT-bearer grant in the OAuth provider (``OAuthProvider(jwt_bearer=...)``) with
its two sources (``oauth.grants``), against a scripted authorization server (and
identity provider) on 127.0.0.1: a workload's identity JWT presented as the grant's
assertion, an enterprise user's ID token exchanged for an ID-JAG first; no user
agent, no registration; a refusal is final (no retry, no other grant) and quotes
no token.  The suite's ``auth/wif-jwt-bearer`` and
``auth/enterprise-managed-authorization`` run the same against its own servers."""

from __future__ import annotations

import base64

import pytest
from mrtr_transports.client.oauth import AuthorizationFailed, enterprise_identity, workload_identity
from test_oauth_provider import (
    Reply,
    Seen,
    Server,
    challenge,
    json_reply,
    oauth_server,
    provider,
    serving,
)

from mrtr_core.auth._grants import ID_JAG, JWT_BEARER_GRANT, TOKEN_EXCHANGE_GRANT

pytestmark = pytest.mark.anyio

WORKLOAD_JWT = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ3b3JrbG9hZCJ9.c2lnbmF0dXJl"
ID_TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhZGEifQ.aWQtc2lnbmF0dXJl"
THE_JAG = "eyJ0eXAiOiJvYXV0aC1pZC1qYWcrand0In0.eyJzdWIiOiJhZGEifQ.amFnLXNpZ25hdHVyZQ"


def never_asked(url: str) -> str:
    raise AssertionError("no user agent in a JWT-bearer grant")


def token_requests(server: Server) -> list[Seen]:
    return [s for s in server.seen if s.path == "/token"]


async def test_a_workload_jwt_is_presented_in_the_jwt_bearer_grant() -> None:
    async with serving(oauth_server()) as server:
        auth = provider(
            server,
            user_agent=never_asked,
            client_id="workload-client",
            jwt_bearer=workload_identity(WORKLOAD_JWT),
        )
        assert await auth.challenged(401, challenge(server), None)
        assert await auth.authorization() == ("Authorization", "Bearer access-1")
        (request,) = token_requests(server)
        form = request.form()
        assert form["grant_type"] == JWT_BEARER_GRANT and form["assertion"] == WORKLOAD_JWT
        assert form["resource"] == f"{server.base}/mcp" and form["client_id"] == "workload-client"
        assert not {"/authorize", "/register"} & set(server.paths())


async def test_a_refused_assertion_is_final() -> None:
    refusal = {"error": "invalid_grant", "error_description": "assertion expired"}
    server = oauth_server()

    async def refuse(seen: Seen) -> Reply:
        return json_reply(refusal, 400)

    server.routes["/token"] = refuse
    async with serving(server):
        auth = provider(
            server,
            user_agent=never_asked,
            client_id="w",
            jwt_bearer=workload_identity(WORKLOAD_JWT),
        )
        with pytest.raises(AuthorizationFailed, match="invalid_grant") as failed:
            await auth.challenged(401, challenge(server), None)
        assert WORKLOAD_JWT not in str(failed.value)
        assert len(token_requests(server)) == 1  # no retry, no other grant
        assert "/authorize" not in server.paths()
        assert await auth.authorization() is None


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_workload_token_is_read_when_needed(asynchronous: bool) -> None:
    issued = iter([WORKLOAD_JWT, WORKLOAD_JWT + "2"])

    async def read_async() -> str:
        return next(issued)

    async with serving(oauth_server()) as server:
        source = workload_identity(read_async if asynchronous else lambda: next(issued))
        auth = provider(server, user_agent=never_asked, client_id="w", jwt_bearer=source)
        await auth.challenged(401, challenge(server), None)
        sent = await auth.authorization()
        await auth.store.save_tokens(f"{server.base}/mcp", server.base, None)  # (forgotten)
        await auth.challenged(401, challenge(server), sent)
        assertions = [s.form()["assertion"] for s in token_requests(server)]
        assert assertions == [WORKLOAD_JWT, WORKLOAD_JWT + "2"]


def enterprise_server(*, idp_answer: dict[str, str] | None = None, status: int = 200) -> Server:
    """``oauth_server`` with an identity provider at ``/idp/token`` issuing ID-JAGs."""
    server = oauth_server()

    async def idp_token(seen: Seen) -> Reply:
        return json_reply(
            idp_answer
            or {"access_token": THE_JAG, "issued_token_type": ID_JAG, "token_type": "N_A"},
            status,
        )

    server.routes["/idp/token"] = idp_token
    return server


async def test_an_enterprise_id_token_is_exchanged_for_an_id_jag_then_presented() -> None:
    async with serving(enterprise_server()) as server:
        source = enterprise_identity(
            token_endpoint=f"{server.base}/idp/token", id_token=ID_TOKEN, client_id="idp-client"
        )
        auth = provider(
            server,
            user_agent=never_asked,
            client_id="mcp-client",
            client_secret="mcp-secret",
            jwt_bearer=source,
        )
        assert await auth.challenged(401, challenge(server), None)
        exchange = next(s for s in server.seen if s.path == "/idp/token")
        form = exchange.form()
        assert form["grant_type"] == TOKEN_EXCHANGE_GRANT
        assert form["requested_token_type"] == ID_JAG
        assert form["subject_token"] == ID_TOKEN and form["client_id"] == "idp-client"
        assert form["audience"] == server.base  # the authorization server's issuer
        assert form["resource"] == f"{server.base}/mcp"
        (grant,) = token_requests(server)
        assert grant.form()["grant_type"] == JWT_BEARER_GRANT
        assert grant.form()["assertion"] == THE_JAG
        basic = base64.b64encode(b"mcp-client:mcp-secret").decode()
        assert grant.headers["authorization"] == f"Basic {basic}"
        # The user's ID token went to the identity provider only.
        assert all(ID_TOKEN not in s.body.decode() for s in server.seen if s is not exchange)
        assert await auth.authorization() == ("Authorization", "Bearer access-1")


@pytest.mark.parametrize(
    ("answer", "status", "match"),
    [
        ({"error": "invalid_grant"}, 400, "refused"),
        ({"access_token": THE_JAG, "issued_token_type": "urn:x:other"}, 200, "not an ID-JAG"),
    ],
)
async def test_an_identity_provider_refusal_stops_before_the_grant(answer, status, match) -> None:
    async with serving(enterprise_server(idp_answer=answer, status=status)) as server:
        source = enterprise_identity(
            token_endpoint=f"{server.base}/idp/token",
            id_token=ID_TOKEN,
            client_id="idp-client",
            client_secret="idp-secret",
        )
        auth = provider(server, user_agent=never_asked, client_id="c", jwt_bearer=source)
        with pytest.raises(AuthorizationFailed, match=match) as failed:
            await auth.challenged(401, challenge(server), None)
        assert ID_TOKEN not in str(failed.value) and THE_JAG not in str(failed.value)
        exchange = next(s for s in server.seen if s.path == "/idp/token")
        assert exchange.headers["authorization"].startswith("Basic ")
        assert "client_id" not in exchange.form()
        assert token_requests(server) == []
