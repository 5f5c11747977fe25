"""Checking a DPoP proof (``mrtr_core.auth._dpop_proof``, RFC 9449 section 7): the
header's key, the thumbprint binding, the claims against the request and the clock,
``htu``'s normalisation, and the ``DPoP`` challenge."""

from __future__ import annotations

import base64
import json

import pytest

from mrtr_core.auth import BearerChallenge
from mrtr_core.auth import _dpop_proof as check
from mrtr_core.auth._dpop import access_token_hash

# RFC 7638, section 3.1's example key and thumbprint.
RSA_JWK = {
    "kty": "RSA",
    "n": (
        "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJ"
        "ECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2"
        "QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh"
        "6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
    ),
    "e": "AQAB",
    "alg": "RS256",
    "kid": "2011-04-29",
}
RSA_THUMBPRINT = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
EC_JWK = {"kty": "EC", "crv": "P-256", "x": "x-coordinate", "y": "y-coordinate"}
TOKEN = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"
URL = "https://mcp.example.com/mcp"
NOW = 1_700_000_000.0


def segment(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def proof(**header: object) -> str:
    fields = {"typ": "dpop+jwt", "alg": "ES256", "jwk": EC_JWK, **header}
    return f"{segment({k: v for k, v in fields.items() if v is not None})}.{segment({})}.sig"


def test_the_thumbprint_is_rfc_7638s():
    assert check.jwk_thumbprint(RSA_JWK) == RSA_THUMBPRINT
    # Only the required members count, in lexicographic order.
    assert check.jwk_thumbprint({**RSA_JWK, "use": "sig"}) == RSA_THUMBPRINT
    okp = {"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
    # RFC 8037, appendix A.3.
    assert check.jwk_thumbprint(okp) == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"


@pytest.mark.parametrize(
    "jwk",
    [
        {"kty": "EC", "crv": "P-256", "x": "x"},  # no y
        {"kty": "RSA", "n": 7, "e": "AQAB"},
        {"kty": "oct", "k": "c2VjcmV0"},
        {"crv": "P-256", "x": "x", "y": "y"},
    ],
)
def test_a_key_without_its_members_has_no_thumbprint(jwk):
    with pytest.raises(check.InvalidProof, match="lacks a member"):
        check.jwk_thumbprint(jwk)


def test_a_proofs_key():
    key = check.proof_key(proof(), algorithms={"ES256", "RS256"})
    assert key.algorithm == "ES256"
    assert key.jwk == EC_JWK
    assert key.thumbprint == check.jwk_thumbprint(EC_JWK)
    rsa = check.proof_key(proof(alg="PS256", jwk=RSA_JWK), algorithms={"PS256"})
    assert rsa.thumbprint == RSA_THUMBPRINT
    okp = {"kty": "OKP", "crv": "Ed25519", "x": "x"}
    assert check.proof_key(proof(alg="EdDSA", jwk=okp), algorithms={"EdDSA"}).jwk == okp


@pytest.mark.parametrize(
    ("made", "reason"),
    [
        ("not a jwt", "well-formed"),
        (proof(typ="JWT"), "typ"),
        (proof(typ=None), "typ"),
        (proof(alg="none"), "alg"),
        (proof(alg="HS256"), "alg"),  # never symmetric, even when the caller lists it
        (proof(alg="RS256", jwk=RSA_JWK), "alg"),  # asymmetric but not allowed here
        (proof(alg=None), "alg"),
        (proof(jwk=None), "jwk"),
        (proof(jwk="a key"), "jwk"),
        (proof(jwk={**EC_JWK, "d": "private"}), "private members"),
        (proof(jwk={**RSA_JWK, "p": "private"}, alg="PS256"), "private members"),
        (proof(jwk=RSA_JWK), "not a key its alg"),  # ES256 with an RSA key
        (proof(jwk={**EC_JWK, "crv": "P-384"}), "not a key its alg"),
        (proof(alg="EdDSA", jwk=EC_JWK), "not a key its alg"),
        (proof(alg="PS256", jwk=EC_JWK), "not a key its alg"),
        (proof(jwk={"kty": "EC", "crv": "P-256", "x": "x"}), "lacks a member"),
    ],
)
def test_a_proofs_header_breaking_a_rule_is_refused(made, reason):
    with pytest.raises(check.InvalidProof, match=reason) as caught:
        check.proof_key(made, algorithms={"ES256", "PS256", "EdDSA", "HS256"})
    assert caught.value.error == "invalid_dpop_proof"
    assert made not in caught.value.message


def test_the_binding():
    key = check.proof_key(proof(), algorithms={"ES256"})
    check.check_binding(key, key.thumbprint)
    with pytest.raises(check.InvalidProof, match="another key"):
        check.check_binding(key, RSA_THUMBPRINT)
    with pytest.raises(check.InvalidProof, match="not bound"):
        check.check_binding(key, None)


@pytest.mark.parametrize(
    ("claims", "bound"),
    [
        ({}, None),
        ({"cnf": {"jkt": RSA_THUMBPRINT}}, RSA_THUMBPRINT),
    ],
)
def test_a_tokens_binding(claims, bound):
    assert check.token_binding(claims) == bound


@pytest.mark.parametrize(
    "cnf",
    [{"x5t#S256": "certificate"}, {"jkt": 7}, "a key", []],
)
def test_a_binding_this_server_cannot_check_is_refused(cnf):
    with pytest.raises(check.InvalidProof, match="cannot check"):
        check.token_binding({"cnf": cnf})


def claims(**changed: object) -> dict[str, object]:
    fields: dict[str, object] = {
        "htm": "POST",
        "htu": URL,
        "iat": int(NOW),
        "jti": "e1j3V_bKic8-LAEB",
        "ath": access_token_hash(TOKEN),
        **changed,
    }
    return {k: v for k, v in fields.items() if v is not None}


def checked(made: dict[str, object], **options: object) -> str:
    settings: dict[str, object] = {
        "method": "POST",
        "urls": [URL],
        "now": NOW,
        "max_age": 60,
        "skew": 5,
        "access_token": TOKEN,
        **options,
    }
    return check.check_proof_claims(made, **settings)  # type: ignore[arg-type]


def test_good_claims_give_the_jti():
    assert checked(claims()) == "e1j3V_bKic8-LAEB"
    assert checked(claims(iat=NOW - 60)) == "e1j3V_bKic8-LAEB"  # the window's edges
    assert checked(claims(iat=NOW + 5.0)) == "e1j3V_bKic8-LAEB"
    assert checked(claims(nonce="n-1"), nonces={"n-0", "n-1"}) == "e1j3V_bKic8-LAEB"
    assert checked(claims(jti="j" * check.MAX_JTI_LENGTH)) == "j" * check.MAX_JTI_LENGTH
    # Any of the URLs the request was addressed by (its public URL, the one it reached).
    other = "http://127.0.0.1:8000/mcp"
    assert checked(claims(htu=other), urls=[URL, other]) == "e1j3V_bKic8-LAEB"


@pytest.mark.parametrize(
    ("made", "reason"),
    [
        (claims(htm="GET"), "htm"),
        (claims(htm="post"), "htm"),
        (claims(htm=None), "htm"),
        (claims(htu="https://mcp.example.com/other"), "htu"),
        (claims(htu="https://elsewhere.example.com/mcp"), "htu"),
        (claims(htu="http://mcp.example.com/mcp"), "htu"),
        (claims(htu="https://mcp.example.com:8443/mcp"), "htu"),
        (claims(htu="wss://mcp.example.com/mcp"), "htu"),
        (claims(htu="/mcp"), "htu"),
        (claims(htu=7), "htu"),
        (claims(htu=None), "htu"),
        (claims(iat=NOW - 61), "too old"),
        (claims(iat=NOW + 6), "future"),
        (claims(iat="1700000000"), "iat"),
        (claims(iat=True), "iat"),
        (claims(iat=None), "iat"),
        (claims(jti=None), "jti"),
        (claims(jti=""), "jti"),
        (claims(jti=7), "jti"),
        (claims(jti="j" * (check.MAX_JTI_LENGTH + 1)), "jti"),
        (claims(ath=access_token_hash("another token")), "ath"),
        (claims(ath=None), "ath"),
    ],
)
def test_claims_breaking_a_rule_are_refused(made, reason):
    with pytest.raises(check.InvalidProof, match=reason) as caught:
        checked(made)
    assert type(caught.value) is check.InvalidProof
    assert TOKEN not in caught.value.message


@pytest.mark.parametrize("nonce", [None, "n-old", 7])
def test_a_proof_without_the_current_nonce_is_asked_for_it(nonce):
    with pytest.raises(check.NonceRequired) as caught:
        checked(claims(nonce=nonce), nonces={"n-1"})
    assert caught.value.error == "use_dpop_nonce"


def test_an_unreadable_url_names_no_request():
    # A URL the server could not normalise never matches, even itself.
    assert check.normalized_htu("https://mcp.example.com:port/mcp") is None
    with pytest.raises(check.InvalidProof, match="htu"):
        checked(claims(htu="https://h:x/"), urls=["https://h:x/"])


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
        ("HTTPS://MCP.Example.COM/mcp", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp"),
        ("http://mcp.example.com:80/mcp", "http://mcp.example.com/mcp"),
        ("http://mcp.example.com:443/mcp", "http://mcp.example.com:443/mcp"),
        ("https://mcp.example.com/mcp?x=1#f", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com", "https://mcp.example.com/"),
        ("https://mcp.example.com/a/./b/../mcp", "https://mcp.example.com/a/mcp"),
        ("https://mcp.example.com/a/..", "https://mcp.example.com/"),
        ("https://mcp.example.com/../..", "https://mcp.example.com/"),
        ("https://mcp.example.com/a/.", "https://mcp.example.com/a/"),
        ("https://mcp.example.com/%7euser/%2fx", "https://mcp.example.com/~user/%2Fx"),
        ("https://m%63p.example.com/mcp", "https://mcp.example.com/mcp"),
        ("http://[::1]:8000/mcp", "http://[::1]:8000/mcp"),
        ("http://[::1]:80/mcp", "http://[::1]/mcp"),
        ("ftp://mcp.example.com/mcp", None),
        ("https:///mcp", None),
        ("https://user@mcp.example.com/mcp", None),
        ("mcp.example.com/mcp", None),
    ],
)
def test_htu_normalisation(url, normal):
    assert check.normalized_htu(url) == normal


def test_the_dpop_challenge():
    plain = check.dpop_challenge(["ES256", "RS256"])
    assert plain == 'DPoP algs="ES256 RS256"'
    full = check.dpop_challenge(
        ["ES256"],
        resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
        scope=["mcp:tools"],
        error="invalid_dpop_proof",
        description='the "htu" is wrong',
    )
    # A client reads it as the DPoP challenge, with the same parameters as Bearer's.
    read = BearerChallenge.from_headers(full, scheme="DPoP")
    assert read is not None
    assert read.extra == {"algs": "ES256"}
    assert read.scope == ("mcp:tools",)
    assert read.error == "invalid_dpop_proof"
    assert read.error_description == 'the "htu" is wrong'
    assert read.resource_metadata is not None
    assert BearerChallenge.from_headers(full) is None
