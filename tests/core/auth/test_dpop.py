"""DPoP's pure parts (``mrtr_core.auth._dpop``, RFC 9449): the algorithm a client signs
with, a proof's header and claims, ``ath``, and when a refusal asks for a nonce."""

from __future__ import annotations

import base64
import hashlib

import pytest

from mrtr_core import LocalProtocolError
from mrtr_core.auth import AuthorizationServerMetadata, BearerChallenge
from mrtr_core.auth import _dpop as dpop
from mrtr_core.auth._client import Tokens, read_token_response

ISSUER = "https://as.example.com"
JWK = {"kty": "EC", "crv": "P-256", "x": "x-coordinate", "y": "y-coordinate"}


def server(**extra: object) -> AuthorizationServerMetadata:
    return AuthorizationServerMetadata.from_json({"issuer": ISSUER, **extra}, issuer=ISSUER)


@pytest.mark.parametrize(
    ("listed", "ours", "chosen"),
    [
        (None, ("ES256",), None),  # the server does not say: no DPoP
        ("ES256", ("ES256",), None),  # not a list
        ([], ("ES256",), None),
        (["RS256", "ES256"], ("ES256",), "ES256"),
        (["RS256"], ("ES256",), None),
        (["none", "HS256", "ES256"], ("HS256", "ES256"), "ES256"),  # never symmetric
        (["ES256", 7], ("PS256", "ES256"), "ES256"),
    ],
)
def test_the_signing_algorithm(listed, ours, chosen):
    extra = {} if listed is None else {"dpop_signing_alg_values_supported": listed}
    assert dpop.signing_algorithm(server(**extra), ours) == chosen


def test_ath_is_the_base64url_sha256_of_the_token():
    token = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"
    expected = base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=")
    assert dpop.access_token_hash(token) == expected.decode()
    # RFC 9449, section 7.1's example.
    assert dpop.access_token_hash(token) == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"


def test_the_proof_header_names_the_public_key():
    assert dpop.proof_header(JWK, "ES256") == {"typ": "dpop+jwt", "alg": "ES256", "jwk": JWK}


@pytest.mark.parametrize(
    ("jwk", "alg"),
    [
        ({**JWK, "d": "the private scalar"}, "ES256"),
        ({"kty": "oct", "k": "c2VjcmV0"}, "ES256"),
        (JWK, "HS256"),
        (JWK, "none"),
    ],
)
def test_a_proof_is_signed_by_a_public_key_pair_only(jwk, alg):
    with pytest.raises(LocalProtocolError):
        dpop.proof_header(jwk, alg)


def test_the_proof_claims():
    claims = dpop.proof_claims(
        method="post", url="https://as.example.com/token?x=1#f", now=1000.9, jti="j1"
    )
    assert claims == {
        "jti": "j1",
        "htm": "POST",
        "htu": "https://as.example.com/token",
        "iat": 1000,
    }
    to_resource = dpop.proof_claims(
        method="GET",
        url="http://127.0.0.1:8000/mcp",
        now=5,
        jti="j2",
        nonce="n-1",
        access_token="t0ken",
    )
    assert to_resource["nonce"] == "n-1"
    assert to_resource["ath"] == dpop.access_token_hash("t0ken")
    assert to_resource["htu"] == "http://127.0.0.1:8000/mcp"


@pytest.mark.parametrize("url", ["ws://127.0.0.1/mcp", "/token", "https:///token"])
def test_a_proof_is_for_an_http_url(url):
    with pytest.raises(LocalProtocolError):
        dpop.proof_claims(method="POST", url=url, now=0, jti="j")


NONCE_CHALLENGE = BearerChallenge(error="use_dpop_nonce")


@pytest.mark.parametrize(
    ("status", "header", "error", "challenge", "nonce"),
    [
        (400, "eyJ7S_zG.eyJH0-Z.HX4w-7v", "use_dpop_nonce", None, "eyJ7S_zG.eyJH0-Z.HX4w-7v"),
        (400, " n1 ", "use_dpop_nonce", None, "n1"),
        (400, "n1", "invalid_grant", None, None),  # another error: no nonce asked
        (400, None, "use_dpop_nonce", None, None),  # asked, but none sent
        (401, "n1", None, NONCE_CHALLENGE, "n1"),
        (401, "n1", None, BearerChallenge(error="invalid_token"), None),
        (401, "n1", None, None, None),
        (401, "n1", "use_dpop_nonce", None, None),  # a resource asks by its challenge
        (403, "n1", None, NONCE_CHALLENGE, None),
        (400, 'a"b', "use_dpop_nonce", None, None),  # not NQCHAR
        (400, "a b", "use_dpop_nonce", None, None),
        (400, "", "use_dpop_nonce", None, None),
        (400, "n" * (dpop.MAX_NONCE_LENGTH + 1), "use_dpop_nonce", None, None),
    ],
)
def test_the_nonce_a_refusal_asks_for(status, header, error, challenge, nonce):
    assert dpop.requested_nonce(status, header, error=error, challenge=challenge) == nonce


def test_a_dpop_challenge_reads_like_a_bearer_one():
    header = (
        'DPoP error="use_dpop_nonce", resource_metadata="https://r/.well-known/x", algs="ES256"'
    )
    read = BearerChallenge.from_headers(header, scheme="DPoP")
    assert read is not None and read.error == "use_dpop_nonce"
    assert read.resource_metadata == "https://r/.well-known/x"
    assert read.extra == {"algs": "ES256"}
    assert BearerChallenge.from_headers(header) is None  # (not a Bearer challenge)


def test_a_dpop_token_response_only_after_a_proof():
    answer = {"access_token": "t0ken", "token_type": "DPoP", "expires_in": 60}
    tokens = read_token_response(200, answer, now=0, dpop=True)
    assert tokens.token_type == "DPoP" and tokens.dpop_bound
    assert tokens.header() == ("Authorization", "DPoP t0ken")
    with pytest.raises(Exception, match="unsupported token_type"):
        read_token_response(200, answer, now=0)
    # A server that took the proof but issued a Bearer token: used as Bearer.
    bearer = read_token_response(200, {**answer, "token_type": "bearer"}, now=0, dpop=True)
    assert bearer.token_type == "Bearer" and not bearer.dpop_bound
    assert bearer.header() == ("Authorization", "Bearer t0ken")
    assert not Tokens(access_token="x").dpop_bound
