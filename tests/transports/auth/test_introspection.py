"""The introspection verifier (RFC 7662) against an introspection endpoint served over
HTTP on 127.0.0.1 (both loops): authenticated to it, ``active: false`` refused, the
audience and expiry checked, a good answer kept briefly, an endpoint that fails refused
without quoting the token."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

import pytest
from authserver_kit import (
    INTROSPECTION_ID,
    INTROSPECTION_SECRET,
    ISSUER,
    RESOURCE,
    AuthServerApp,
    Issuer,
    hosting,
)
from mrtr_transports.auth import IntrospectionVerifier, TokenRefused, VerifierUnavailable

pytestmark = pytest.mark.anyio

TOKEN = "opaque-token-0123456789"


@pytest.fixture
async def server() -> AsyncIterator[tuple[AuthServerApp, int]]:
    app = AuthServerApp(Issuer.__new__(Issuer))  # (no keys needed: opaque tokens)
    async with hosting(app) as port:
        yield app, port


def verifier(
    port: int, secret: str = INTROSPECTION_SECRET, **options: float
) -> IntrospectionVerifier:
    return IntrospectionVerifier(
        endpoint=f"http://127.0.0.1:{port}/introspect",
        client_id=INTROSPECTION_ID,
        client_secret=secret,
        audience=RESOURCE,
        issuer=ISSUER,
        **options,  # type: ignore[arg-type]
    )


def active(**extra: object) -> dict[str, object]:
    now = int(time.time())
    return {
        "active": True,
        "sub": "alice",
        "iss": ISSUER,
        "aud": RESOURCE,
        "scope": "mcp:tools",
        "client_id": "test-client",
        "exp": now + 600,
        **extra,
    }


async def test_an_active_token_gives_its_identity_and_is_kept(
    server: tuple[AuthServerApp, int],
) -> None:
    app, port = server
    app.introspected[TOKEN] = active()
    check = verifier(port)
    identity = await check.verify(TOKEN)
    assert (identity.subject, identity.issuer, identity.scopes) == ("alice", ISSUER, {"mcp:tools"})
    assert (await check.verify(TOKEN)).subject == "alice"
    assert app.counts["/introspect"] == 1  # the second from the cache


async def test_the_cache_is_brief(server: tuple[AuthServerApp, int]) -> None:
    app, port = server
    app.introspected[TOKEN] = active()
    check = verifier(port, cache_ttl=0.0)
    await check.verify(TOKEN)
    app.introspected[TOKEN] = {"active": False}  # revoked
    with pytest.raises(TokenRefused, match="not active"):
        await check.verify(TOKEN)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"active": False}, "not active"),
        (active(active="true"), "not active"),
        (active(aud="https://other.example.test/mcp"), "another resource"),
        (active(aud=None), "another resource"),
        (active(exp=int(time.time()) - 3600), "expired"),
        (active(nbf=int(time.time()) + 3600), "not valid yet"),
        (active(iss="https://evil.example.test"), "another issuer"),
        (active(sub=""), "no subject"),
    ],
)
async def test_a_bad_answer_is_refused(
    answer: dict[str, object],
    reason: str,
    server: tuple[AuthServerApp, int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    app, port = server
    caplog.set_level(logging.DEBUG)
    app.introspected[TOKEN] = {k: v for k, v in answer.items() if v is not None}
    with pytest.raises(TokenRefused, match=reason) as refused:
        await verifier(port).verify(TOKEN)
    assert TOKEN not in str(refused.value) and TOKEN not in caplog.text


async def test_an_endpoint_that_refuses_us_or_is_down_gives_no_access(
    server: tuple[AuthServerApp, int],
) -> None:
    app, port = server
    app.introspected[TOKEN] = active()
    with pytest.raises(VerifierUnavailable, match="401") as refused:
        await verifier(port, secret="wrong").verify(TOKEN)
    assert TOKEN not in str(refused.value) and "wrong" not in str(refused.value)
    app.down = True
    with pytest.raises(VerifierUnavailable, match="503"):
        await verifier(port).verify(TOKEN)
    with pytest.raises(VerifierUnavailable, match="cannot connect"):
        await verifier(1).verify(TOKEN)
