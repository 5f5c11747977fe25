"""DPoP (RFC 9449; the MCP extension ``io.modelcontextprotocol/auth/dpop``), the
client's pure parts: what a proof says, which algorithm to sign it with, and when a
refusal asks for a server-supplied nonce.

The model: the client holds a key pair of its own.  Each token request and each
request to the resource carries a ``DPoP`` header, a JWT signed with that key whose
header names the public key (``typ`` ``dpop+jwt``, ``jwk``) and whose claims bind it
to one request: ``htm`` (the method), ``htu`` (the URL, without query or fragment),
``iat``, a fresh ``jti``, and, to the resource, ``ath`` (the access token's SHA-256).
The authorization server binds the token it issues (``token_type`` ``DPoP``) to the
key, and the resource accepts it only with a proof by that key (``Authorization:
DPoP <token>``).  A server may demand a ``nonce`` it chose: a token endpoint's 400
``use_dpop_nonce`` or a resource's 401 DPoP challenge with ``error="use_dpop_nonce"``,
the nonce in the ``DPoP-Nonce`` header; the next proof carries it.

The transports make the key, the ``jti`` and the clock, and sign.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from .._errors import LocalProtocolError
from ._challenge import BearerChallenge
from ._metadata import AuthorizationServerMetadata

__all__ = [
    "NONCE_ERROR",
    "SCHEME",
    "access_token_hash",
    "proof_claims",
    "proof_header",
    "requested_nonce",
    "signing_algorithm",
]

SCHEME: Final = "DPoP"
NONCE_ERROR: Final = "use_dpop_nonce"
#: A server's nonce (RFC 9449, section 8.1: ``1*NQCHAR``), bounded here.
MAX_NONCE_LENGTH: Final = 512
_NQCHAR = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
#: The members of a JWK that are private (RFC 7518, section 6): never in a proof.
_PRIVATE_MEMBERS: Final = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
_ASYMMETRIC: Final = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


def signing_algorithm(server: AuthorizationServerMetadata, ours: Iterable[str]) -> str | None:
    """The first of ``ours`` the server lists in ``dpop_signing_alg_values_supported``
    (RFC 9449, section 5.1), or ``None``: the server takes no DPoP we can sign."""
    listed = server.extra.get("dpop_signing_alg_values_supported")
    if not isinstance(listed, list):
        return None
    offered = {a for a in listed if isinstance(a, str) and a in _ASYMMETRIC}
    return next((a for a in ours if a in offered), None)


def access_token_hash(access_token: str) -> str:
    """``ath``: the base64url SHA-256 of the access token's ASCII (RFC 9449, 4.2)."""
    digest = hashlib.sha256(access_token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def proof_header(public_jwk: Mapping[str, Any], algorithm: str) -> dict[str, Any]:
    """The JOSE header of a proof: ``typ``, ``alg``, and the public key as ``jwk``."""
    if algorithm not in _ASYMMETRIC:
        raise LocalProtocolError(f"a DPoP proof is signed asymmetrically, not {algorithm!r}")
    private = _PRIVATE_MEMBERS.intersection(public_jwk)
    if private:
        raise LocalProtocolError("a DPoP proof's jwk is the public key (no private members)")
    return {"typ": "dpop+jwt", "alg": algorithm, "jwk": dict(public_jwk)}


def proof_claims(
    *,
    method: str,
    url: str,
    now: float,
    jti: str,
    nonce: str | None = None,
    access_token: str | None = None,
) -> dict[str, Any]:
    """The claims of the proof for ``method`` ``url`` (``htu`` without its query and
    fragment), with the server's ``nonce`` and, to a resource, the token's ``ath``."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise LocalProtocolError("a DPoP proof is for an http(s) URL")
    claims: dict[str, Any] = {
        "jti": jti,
        "htm": method.upper(),
        "htu": urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")),
        "iat": int(now),
    }
    if nonce is not None:
        claims["nonce"] = nonce
    if access_token is not None:
        claims["ath"] = access_token_hash(access_token)
    return claims


def requested_nonce(
    status: int,
    nonce_header: str | None,
    *,
    error: str | None = None,
    challenge: BearerChallenge | None = None,
) -> str | None:
    """The nonce a refusal asks the next proof to carry, or ``None`` when it asks for
    none: a token endpoint's 400 whose ``error`` is ``use_dpop_nonce``, or a
    resource's 401 whose DPoP ``challenge`` says so; the ``DPoP-Nonce`` header must
    be a well-formed nonce (else the refusal stands as it is)."""
    asked = (status == 400 and error == NONCE_ERROR) or (
        status == 401 and challenge is not None and challenge.error == NONCE_ERROR
    )
    if not asked or nonce_header is None:
        return None
    nonce = nonce_header.strip()
    if len(nonce) > MAX_NONCE_LENGTH or not _NQCHAR.fullmatch(nonce):
        return None
    return nonce
