"""DPoP (RFC 9449, section 7), the resource server's pure parts: checking a proof
the client sent beside an ``Authorization: DPoP <token>`` header.

The model: a DPoP-bound token names its key by thumbprint (``cnf.jkt``, RFC 7638);
each request carries a proof, a JWT signed with that key whose header carries the
public key itself (``jwk``).  The server accepts the request when the proof

* is a ``dpop+jwt`` signed with an asymmetric algorithm it allows, by the public key
  in its header (no private members), whose thumbprint is the token's ``cnf.jkt``
  (:func:`proof_key`, :func:`check_binding`; the signature itself is checked by
  the transports, with a JOSE library);
* names this request: ``htm`` its method, ``htu`` its URL (no query or fragment,
  compared after RFC 3986's syntax- and scheme-based normalisation), ``ath`` the
  token's SHA-256, the server's ``nonce`` when it demands one;
* is fresh: ``iat`` within the caller's window of the caller's clock, and its ``jti``
  (bounded) not seen before within that window (the transports keep what was seen).

A proof that breaks a rule is :class:`InvalidProof` (``invalid_dpop_proof``); one
without the nonce the server asked for is :class:`NonceRequired`
(``use_dpop_nonce``, the nonce in a ``DPoP-Nonce`` header).  The server's
``WWW-Authenticate: DPoP algs="..."`` challenge is :func:`dpop_challenge`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import attrs

from .._errors import INVALID_REQUEST, RemoteProtocolError
from ._challenge import _quoted
from ._dpop import _ASYMMETRIC, _PRIVATE_MEMBERS, NONCE_ERROR, SCHEME, access_token_hash
from ._jose import MalformedToken, read_jose_header

__all__ = [
    "INVALID_PROOF_ERROR",
    "MAX_JTI_LENGTH",
    "InvalidProof",
    "NonceRequired",
    "ProofKey",
    "check_binding",
    "check_proof_claims",
    "dpop_challenge",
    "jwk_thumbprint",
    "normalized_htu",
    "proof_key",
    "token_binding",
]

INVALID_PROOF_ERROR: Final = "invalid_dpop_proof"
#: The longest ``jti`` kept (RFC 9449 asks for 96 bits of randomness at least).
MAX_JTI_LENGTH: Final = 256
#: The members RFC 7638 hashes, per key type (the others are ignored).
_THUMBPRINT_MEMBERS: Final = {
    "EC": ("crv", "kty", "x", "y"),
    "RSA": ("e", "kty", "n"),
    "OKP": ("crv", "kty", "x"),
}
_CURVES: Final = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


class InvalidProof(RemoteProtocolError):
    """A DPoP proof (or a bound token's binding) that breaks a rule of RFC 9449: the
    request is refused 401 with ``error="invalid_dpop_proof"``.  The message names the
    rule, never the proof or the token."""

    code = INVALID_REQUEST
    error = INVALID_PROOF_ERROR


class NonceRequired(InvalidProof):
    """A proof without the nonce the server demands (or with a stale one): 401 with
    ``error="use_dpop_nonce"`` and the nonce to use in ``DPoP-Nonce``."""

    error = NONCE_ERROR


@attrs.frozen
class ProofKey:
    """What a proof's header says, read and checked: the ``algorithm`` to verify the
    signature with, the public ``jwk`` to verify it by, and that key's RFC 7638
    ``thumbprint``."""

    algorithm: str
    jwk: Mapping[str, Any]
    thumbprint: str


def proof_key(proof: str, *, algorithms: Collection[str]) -> ProofKey:
    """The key of ``proof`` (unverified: the caller checks the signature with it):
    ``typ`` ``dpop+jwt``, ``alg`` among ``algorithms`` and asymmetric, ``jwk`` a
    public key of the type ``alg`` signs with."""
    try:
        header = read_jose_header(proof)
    except MalformedToken:
        raise InvalidProof("the DPoP proof is not a well-formed JWT") from None
    if header.get("typ") != "dpop+jwt":
        raise InvalidProof("a DPoP proof's typ is dpop+jwt")
    algorithm = header.get("alg")
    if algorithm not in _ASYMMETRIC or algorithm not in algorithms:
        raise InvalidProof("the DPoP proof's alg is not one this server accepts")
    jwk = header.get("jwk")
    if not isinstance(jwk, dict):
        raise InvalidProof("a DPoP proof's header carries its public key as jwk")
    if _PRIVATE_MEMBERS.intersection(jwk):
        raise InvalidProof("a DPoP proof's jwk is a public key (it has private members)")
    kty = jwk.get("kty")
    expected = "EC" if algorithm.startswith("ES") else "OKP" if algorithm == "EdDSA" else "RSA"
    if kty != expected or (algorithm in _CURVES and jwk.get("crv") != _CURVES[algorithm]):
        raise InvalidProof("the DPoP proof's jwk is not a key its alg signs with")
    return ProofKey(algorithm, jwk, jwk_thumbprint(jwk))


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public ``jwk`` (base64url, unpadded)."""
    members = _THUMBPRINT_MEMBERS.get(str(jwk.get("kty")))
    if members is None or not all(isinstance(jwk.get(name), str) for name in members):
        raise InvalidProof("the DPoP proof's jwk lacks a member of its key type")
    canonical = json.dumps({name: jwk[name] for name in members}, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def token_binding(claims: Mapping[str, Any]) -> str | None:
    """The thumbprint a token's claims bind it to (``cnf.jkt``, RFC 9449 section 6),
    or ``None`` for an unbound token.  A confirmation this server cannot check (an
    ``x5t#S256`` certificate binding, a malformed ``cnf``) is refused: a bound token
    is never taken as a bearer one."""
    cnf = claims.get("cnf")
    if cnf is None:
        return None
    jkt = cnf.get("jkt") if isinstance(cnf, Mapping) else None
    if not isinstance(jkt, str):
        raise InvalidProof("the token is bound to a key this server cannot check (cnf)")
    return jkt


def check_binding(key: ProofKey, bound_to: str | None) -> None:
    """The proof's key is the one the token is bound to (RFC 9449, section 7.1)."""
    if bound_to is None:
        raise InvalidProof("the token is not bound to a DPoP key (cnf.jkt)")
    if key.thumbprint != bound_to:
        raise InvalidProof("the DPoP proof is signed by another key than the token's")


def check_proof_claims(
    claims: Mapping[str, Any],
    *,
    method: str,
    urls: Iterable[str],
    now: float,
    max_age: float,
    skew: float,
    access_token: str,
    nonces: Collection[str] | None = None,
) -> str:
    """Check a verified proof's ``claims`` against the request (``method``, one of the
    ``urls`` it was addressed by), the clock (``iat`` from ``now - max_age`` to ``now +
    skew``), the ``access_token`` (``ath``) and, when the server demands one, its
    current ``nonces``; return the ``jti`` (the caller refuses one seen before)."""
    if claims.get("htm") != method:
        raise InvalidProof("the DPoP proof's htm is not this request's method")
    htu = claims.get("htu")
    expected = {normalized_htu(url) for url in urls}
    if not isinstance(htu, str) or normalized_htu(htu) not in expected - {None}:
        raise InvalidProof("the DPoP proof's htu is not this request's URL")
    iat = claims.get("iat")
    if isinstance(iat, bool) or not isinstance(iat, (int, float)):
        raise InvalidProof("a DPoP proof's iat is a number")
    if iat < now - max_age:
        raise InvalidProof("the DPoP proof is too old (iat)")
    if iat > now + skew:
        raise InvalidProof("the DPoP proof is issued in the future (iat)")
    jti = claims.get("jti")
    if not isinstance(jti, str) or not 0 < len(jti) <= MAX_JTI_LENGTH:
        raise InvalidProof(f"a DPoP proof's jti is a string of 1 to {MAX_JTI_LENGTH} characters")
    if claims.get("ath") != access_token_hash(access_token):
        raise InvalidProof("the DPoP proof's ath is not this token's hash")
    if nonces is not None and claims.get("nonce") not in nonces:
        raise NonceRequired("the DPoP proof lacks the server's current nonce")
    return jti


def normalized_htu(url: str) -> str | None:
    """``url`` as RFC 9449 compares ``htu`` (section 4.3: RFC 3986's syntax- and
    scheme-based normalisation, without query and fragment), or ``None`` when it is
    no absolute http(s) URL."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in _DEFAULT_PORTS or not host or "@" in parts.netloc:
        return None
    host = _percent_normalized(host).lower()
    if ":" in host:  # (an IPv6 literal keeps its brackets)
        host = f"[{host}]"
    authority = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = _without_dot_segments(_percent_normalized(parts.path)) or "/"
    return f"{scheme}://{authority}{path}"


def dpop_challenge(
    algorithms: Iterable[str],
    *,
    resource_metadata: str | None = None,
    scope: Iterable[str] | None = None,
    error: str | None = None,
    description: str | None = None,
) -> str:
    """The ``WWW-Authenticate`` value ``DPoP algs="..."`` (RFC 9449, section 7.1) with
    RFC 9728's ``resource_metadata`` and RFC 6750's ``scope``, ``error`` and
    ``error_description`` when given."""
    fields = {
        "algs": " ".join(algorithms),
        "resource_metadata": resource_metadata,
        "scope": None if scope is None else " ".join(scope),
        "error": error,
        "error_description": description,
    }
    parts = [f"{name}={_quoted(value)}" for name, value in fields.items() if value is not None]
    return f"{SCHEME} " + ", ".join(parts)


def _percent_normalized(text: str) -> str:
    """Percent-encodings upper-cased, those of unreserved characters decoded."""

    def one(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else "%" + match.group(1).upper()

    return _PERCENT.sub(one, text)


def _without_dot_segments(path: str) -> str:
    """RFC 3986, section 5.2.4, for an absolute path."""
    out: list[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                out.append("")
        elif segment == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(segment)
    return "/".join(out)
