"""A JWT's JOSE header read unverified (``mrtr_core.auth._jose``): what a verifier picks
the key and refuses the algorithm by; bounded, and every malformed shape refused
without quoting the token."""

from __future__ import annotations

import base64
import json

import pytest

from mrtr_core import RemoteProtocolError
from mrtr_core.auth._jose import MAX_HEADER_LENGTH, MalformedToken, read_jose_header


def segment(value: object) -> str:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_the_header_of_a_compact_jws():
    header = {"alg": "RS256", "kid": "rsa-1", "typ": "at+jwt"}
    assert read_jose_header(f"{segment(header)}.{segment({'sub': 'x'})}.c2ln") == header


def test_padding_is_restored_for_every_length():
    for n in range(1, 6):
        header = {"alg": "ES256", "kid": "k" * n}
        assert read_jose_header(segment(header) + ".e30.") == header


@pytest.mark.parametrize(
    "token",
    [
        "",  # nothing
        "no-dot-at-all",
        ".payload.signature",  # an empty header
        "eyJhbGciOiJSUzI1NiJ9=.e30.x",  # padding is not base64url of JWS
        "eyJhbGc+OiJSUzI1NiJ9.e30.x",  # not the base64url alphabet
        f"{segment(b'not json')}.e30.x",
        segment(bytes([0xFF, 0xFE])) + ".e30.x",  # not UTF-8
        f"{segment(['alg', 'RS256'])}.e30.x",  # JSON, not an object
        f"{segment(b'[' * 1500)}.e30.x",  # nested past the parser's depth
        f"{segment({'alg': 'RS256', 'pad': 'x' * MAX_HEADER_LENGTH})}.e30.x",  # too long
        "A.e30.x",  # one character: no whole byte
    ],
)
def test_a_malformed_token_is_refused(token):
    with pytest.raises(MalformedToken) as refused:
        read_jose_header(token)
    assert isinstance(refused.value, RemoteProtocolError)
    assert refused.value.message == "the token is not a well-formed JWT"


def test_a_header_at_the_bound_is_read():
    pad = "x" * 10
    header = {"alg": "RS256", "pad": pad}
    while len(segment(header)) < MAX_HEADER_LENGTH - 3:
        header["pad"] += "x"
    assert len(segment(header)) <= MAX_HEADER_LENGTH
    assert read_jose_header(segment(header) + ".e30.x") == header
