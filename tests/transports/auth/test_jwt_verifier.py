"""The JWT verifier against real tokens (signed here with PyJWT) and a JWKS served over
HTTP by the project's host on 127.0.0.1: every bad token of issue 24 is refused with a
reason that never quotes it; the key set's bounds (size, time), its cache (TTL, one
rate-limited refetch for an unknown ``kid``, the last good set kept while the source is
down).  Both loops: the fetches are anyio."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import anyio
import pytest
from authserver_kit import (
    ISSUER,
    RESOURCE,
    AuthServerApp,
    Issuer,
    hmac_with_public_key,
    hosting,
    random_kid,
    unsigned_token,
)
from mrtr_transports.auth import (
    Identity,
    JwksKeys,
    JwtVerifier,
    TokenRefused,
    VerifierUnavailable,
)

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
async def server(issuer: Issuer) -> AsyncIterator[tuple[AuthServerApp, int]]:
    app = AuthServerApp(issuer)
    async with hosting(app) as port:
        yield app, port


def verifier_at(port: int, path: str = "/jwks", **keys: float) -> JwtVerifier:
    jwks = JwksKeys(f"http://127.0.0.1:{port}{path}", **keys)  # type: ignore[arg-type]
    return JwtVerifier(issuer=ISSUER, audience=RESOURCE, jwks=jwks)


async def test_a_good_token_gives_its_identity(
    issuer: Issuer, server: tuple[AuthServerApp, int]
) -> None:
    _, port = server
    verifier = verifier_at(port)
    identity = await verifier.verify(issuer.token("alice", scope="mcp:tools admin"))
    assert isinstance(identity, Identity)
    assert (identity.subject, identity.issuer, identity.client_id) == (
        "alice",
        ISSUER,
        "test-client",
    )
    assert identity.scopes == {"mcp:tools", "admin"}
    assert identity.audience == (RESOURCE,)
    assert identity.claims["sub"] == "alice"
    # An EC key of the same set, and the canonical form of the audience, verify too.
    ec = await verifier.verify(
        issuer.token("bob", kid="ec-1", aud=RESOURCE.upper().replace("/MCP", "/mcp"))
    )
    assert ec.subject == "bob"
    # Issuer and subject make the principal: the same sub of another issuer is another.
    other = Identity(subject="alice", issuer="https://other.example.test")
    assert identity.principal != other.principal
    assert verifier.keys.fetches == 1  # the set is kept


def _b64(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


BAD_TOKENS = {
    "another resource": (
        lambda i: i.token(aud="https://other.example.test/mcp"),
        "another resource",
    ),
    "expired": (lambda i: i.token(exp_in=-3600), "expired"),
    "not yet valid": (lambda i: i.token(nbf_in=3600), "not valid yet"),
    "issued in the future": (lambda i: i.token(iat=2**31), "not valid yet"),
    "wrong issuer": (lambda i: i.token(iss="https://evil.example.test"), "another issuer"),
    "alg none": (lambda i: unsigned_token(), "'none' is not allowed"),
    "HS256 with the RSA public key": (hmac_with_public_key, "'HS256' is not allowed"),
    "unknown kid": (lambda i: "", None),  # (made in the test: another issuer's key)
    "garbage": (lambda i: "not.a.jwt", "not a well-formed JWT"),
    "a header of deep arrays": (lambda i: _b64(b"[" * 1500) + ".e30.sig", "not a well-formed JWT"),
    "a header that is no object": (lambda i: _b64(b"[1]") + ".e30.sig", "not a well-formed JWT"),
    "no dot": (lambda i: _b64(b'{"alg":"RS256"}'), "not a well-formed JWT"),
    "no aud": (lambda i: i.token(aud=None), "lacks a required claim"),
    "tampered": (lambda i: i.token()[:-6] + "AAAAAA", "does not verify"),
}


@pytest.mark.parametrize("case", sorted(BAD_TOKENS))
async def test_every_bad_token_is_refused_and_never_quoted(
    case: str,
    issuer: Issuer,
    server: tuple[AuthServerApp, int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, port = server
    make, reason = BAD_TOKENS[case]
    token = make(issuer)
    if case == "unknown kid":
        other = Issuer()
        other.kids = {"stranger": other.rsa}
        token, reason = other.token(kid="stranger"), "does not publish"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(TokenRefused) as refused:
        await verifier_at(port).verify(token)
    assert reason is not None and reason in refused.value.reason
    assert token not in str(refused.value) and token not in caplog.text


async def test_the_key_set_must_be_asymmetric_and_named() -> None:
    for algorithms in (["HS256"], ["none"], ["RS256", "HS512"], []):
        with pytest.raises(ValueError, match="asymmetric"):
            JwtVerifier(
                issuer=ISSUER, audience=RESOURCE, jwks="https://as/jwks", algorithms=algorithms
            )
    with pytest.raises(ValueError, match="http"):
        JwksKeys("file:///etc/keys.json")


async def test_an_oversized_key_set_is_refused(
    issuer: Issuer, server: tuple[AuthServerApp, int]
) -> None:
    _, port = server
    verifier = verifier_at(port, "/big")
    with pytest.raises(VerifierUnavailable, match="unavailable"):
        await verifier.verify(issuer.token())


async def test_a_slow_key_set_is_refused_in_its_time(
    issuer: Issuer, server: tuple[AuthServerApp, int]
) -> None:
    app, port = server
    verifier = verifier_at(port, "/slow", timeout=0.3)
    started = anyio.current_time()
    with pytest.raises(VerifierUnavailable):
        await verifier.verify(issuer.token())
    assert anyio.current_time() - started < 2.0
    assert app.counts["/slow"] == 1


async def test_an_unknown_kid_flood_costs_one_fetch_per_interval(
    issuer: Issuer, server: tuple[AuthServerApp, int]
) -> None:
    app, port = server
    verifier = verifier_at(port, refetch_interval=30.0)
    await verifier.verify(issuer.token())
    forged = Issuer()
    for _ in range(50):
        kid = random_kid()
        forged.kids = {kid: forged.rsa}
        with pytest.raises(TokenRefused, match="does not publish"):
            await verifier.verify(forged.token(kid=kid))
    assert app.counts["/jwks"] == 1  # the first fetch; the flood waited for the interval


async def test_a_rotated_key_is_fetched_once_its_kid_appears(
    issuer: Issuer, server: tuple[AuthServerApp, int]
) -> None:
    app, port = server
    verifier = verifier_at(port, refetch_interval=0.0)
    await verifier.verify(issuer.token())
    rotated = Issuer()
    rotated.kids = dict(issuer.kids)
    new_kid = rotated.rotate()
    app.issuer = rotated
    identity = await verifier.verify(rotated.token("carol", kid=new_kid))
    assert identity.subject == "carol"
    assert app.counts["/jwks"] == 2


async def test_the_last_good_set_is_kept_while_the_source_is_down(
    issuer: Issuer, server: tuple[AuthServerApp, int], caplog: pytest.LogCaptureFixture
) -> None:
    app, port = server
    verifier = verifier_at(port, ttl=0.0, refetch_interval=0.0)
    await verifier.verify(issuer.token())
    app.down = True
    caplog.set_level(logging.WARNING)
    identity = await verifier.verify(issuer.token("dave"))  # refetched, failed, kept
    assert identity.subject == "dave"
    assert app.counts["/jwks"] == 2
    assert "keeping the last good set" in caplog.text


async def test_no_key_set_yet_refuses_everyone(
    issuer: Issuer, server: tuple[AuthServerApp, int]
) -> None:
    app, port = server
    app.down = True
    with pytest.raises(VerifierUnavailable):
        await verifier_at(port).verify(issuer.token())


async def test_a_moved_key_set_is_followed_once_and_a_loop_is_not(
    issuer: Issuer, server: tuple[AuthServerApp, int]
) -> None:
    app, port = server
    assert (await verifier_at(port, "/redirect").verify(issuer.token())).subject == "alice"
    assert app.counts["/jwks"] == 1
    with pytest.raises(VerifierUnavailable):
        await verifier_at(port, "/loop").verify(issuer.token())
    assert app.counts["/loop"] == 2  # the first request and its one redirect


@pytest.mark.parametrize("path", ["/notjson", "/symmetric", "/nowhere"])
async def test_a_source_that_is_no_key_set_gives_no_access(
    path: str, issuer: Issuer, server: tuple[AuthServerApp, int], caplog: pytest.LogCaptureFixture
) -> None:
    _, port = server
    caplog.set_level(logging.WARNING)
    with pytest.raises(VerifierUnavailable):
        await verifier_at(port, path).verify(issuer.token())
    assert "no set yet" in caplog.text


async def test_the_key_set_is_found_in_the_issuer_s_metadata(
    issuer: Issuer, server: tuple[AuthServerApp, int]
) -> None:
    app, port = server
    here = f"http://127.0.0.1:{port}"
    verifier = JwtVerifier(issuer=here, audience=RESOURCE)  # no jwks: discovered
    identity = await verifier.verify(issuer.token("erin", iss=here))
    assert (identity.subject, identity.issuer) == ("erin", here)
    assert verifier.keys.url == f"{here}/jwks"
    assert app.counts["/.well-known/oauth-authorization-server"] == 1


async def test_metadata_of_another_issuer_gives_no_keys(
    issuer: Issuer, server: tuple[AuthServerApp, int], caplog: pytest.LogCaptureFixture
) -> None:
    app, port = server
    app.metadata_issuer = "https://evil.example.test"
    here = f"http://127.0.0.1:{port}"
    caplog.set_level(logging.WARNING)
    with pytest.raises(VerifierUnavailable):
        await JwtVerifier(issuer=here, audience=RESOURCE).verify(issuer.token(iss=here))
    assert app.counts["/jwks"] == 0
    assert "is not" in caplog.text


def test_the_gate_loads_no_jose_library() -> None:
    """The endpoint imports the gate; PyJWT and cryptography load with the JWT verifier."""
    import subprocess
    import sys

    code = "import sys, mrtr_transports.asgi; print('jwt' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


async def test_a_jwk_that_names_its_alg_allows_that_one_alone(
    server: tuple[AuthServerApp, int],
) -> None:
    app, port = server
    pinned = Issuer()
    pinned.pinned = {"rsa-1": "RS256"}
    app.issuer = pinned
    verifier = verifier_at(port)
    assert (await verifier.verify(pinned.token(alg="RS256"))).subject == "alice"
    with pytest.raises(TokenRefused, match="does not fit its key"):
        await verifier.verify(pinned.token(alg="PS256"))
    pinned.pinned = {}
    loose = verifier_at(port)  # (a fresh set: the JWK names no alg now)
    assert (await loose.verify(pinned.token(alg="PS256"))).subject == "alice"
    with pytest.raises(TokenRefused, match="does not fit its key"):
        # An EC signature under the RSA key's kid: an RSA key checks no ES256 token.
        await loose.verify(pinned.token(kid="ec-1", header_kid="rsa-1"))
