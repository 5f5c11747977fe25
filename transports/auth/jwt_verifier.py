"""A JWT access token verified locally: signature by a key of the authorization
server's JWKS, then issuer, audience, time and shape (PyJWT does the JOSE).

The rules, each a refusal (``TokenRefused``, 401 ``invalid_token``):

* the header's ``alg`` is in ``algorithms``: asymmetric ones only (RS*, PS*, ES*,
  EdDSA); ``none`` and the HMAC ones cannot even be configured, as the keys are public:
  an HS256 token "signed" with the RSA public key as its secret is refused for its
  ``alg`` before any key is looked at;
* the key is the JWKS key of the header's ``kid`` (``jwks.py``), and its type fits
  ``alg``;
* ``iss`` is ``issuer``; ``aud`` names ``audience`` (the MCP server's canonical
  resource URL: a token minted for another resource is refused, RFC 8707 and the
  specification's "token audience binding");
* ``exp`` is required, and ``exp``/``nbf``/``iat`` are checked with ``leeway``
  seconds of clock skew at most;
* ``sub`` is a non-empty string; a token is ``max_token_length`` characters at most.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import jwt

from mrtr_core.auth import canonical_resource
from mrtr_core.auth._jose import MalformedToken, read_jose_header

from .identity import Identity
from .jwks import JwksKeys
from .refusals import TokenRefused

__all__ = ["ASYMMETRIC_ALGORITHMS", "JwtVerifier"]

#: Every algorithm a JWT verifier may allow (public keys from a JWKS).
ASYMMETRIC_ALGORITHMS: Final = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
DEFAULT_ALGORITHMS: Final = ("RS256", "PS256", "ES256", "EdDSA")
MAX_TOKEN_LENGTH: Final = 16 * 1024

# PyJWT's refusals, said without quoting the token.
_REASONS: Final[tuple[tuple[type[Exception], str], ...]] = (
    (jwt.ExpiredSignatureError, "the token has expired"),
    (jwt.ImmatureSignatureError, "the token is not valid yet (nbf or iat in the future)"),
    (jwt.InvalidAudienceError, "the token is for another resource (aud)"),
    (jwt.InvalidIssuerError, "the token is from another issuer (iss)"),
    (jwt.MissingRequiredClaimError, "the token lacks a required claim"),
    (jwt.InvalidSignatureError, "the token's signature does not verify"),
    (jwt.InvalidAlgorithmError, "the token's algorithm does not fit its key"),
    (jwt.InvalidKeyError, "the token's algorithm does not fit its key"),
    (jwt.DecodeError, "the token is not a well-formed JWT"),
)


class JwtVerifier:
    """Verify JWT access tokens of ``issuer`` for ``audience`` with the keys at ``jwks``
    (a URL, or a :class:`JwksKeys` to set its bounds; ``None``: the ``jwks_uri`` of
    the issuer's metadata, ``JwksKeys.of_issuer``)."""

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks: str | JwksKeys | None = None,
        algorithms: Iterable[str] = DEFAULT_ALGORITHMS,
        leeway: float = 60.0,
        max_token_length: int = MAX_TOKEN_LENGTH,
    ) -> None:
        allowed = tuple(algorithms)
        wrong = [a for a in allowed if a not in ASYMMETRIC_ALGORITHMS]
        if wrong or not allowed:
            raise ValueError(
                f"algorithms are asymmetric ones of {sorted(ASYMMETRIC_ALGORITHMS)}, "
                f"not {wrong or 'none at all'}"
            )
        if not 0 <= leeway <= 300:
            raise ValueError("leeway is 0 to 300 seconds of clock skew")
        self.issuer = issuer
        self.audience = audience
        # Compared in canonical form: an AS may write the resource with a trailing
        # slash or an upper-case host; both name the same resource.
        self._audience = canonical_resource(audience)
        if jwks is None:
            self.keys = JwksKeys.of_issuer(issuer)
        else:
            self.keys = jwks if isinstance(jwks, JwksKeys) else JwksKeys(jwks)
        self.algorithms = allowed
        self.leeway = leeway
        self.max_token_length = max_token_length

    async def verify(self, token: str) -> Identity:
        if len(token) > self.max_token_length:
            raise TokenRefused(f"the token is longer than {self.max_token_length} characters")
        try:
            header = read_jose_header(token)
        except MalformedToken as exc:
            raise TokenRefused(exc.message) from None
        alg = header.get("alg")
        if alg not in self.algorithms:
            shown = alg if isinstance(alg, str) and len(alg) <= 16 else "?"
            raise TokenRefused(f"the token's algorithm {shown!r} is not allowed")
        kid = header.get("kid")
        kid = kid if isinstance(kid, str) else None
        key = await self.keys.key_for(kid)
        pinned = self.keys.pinned_algorithm(kid)
        if (pinned is not None and pinned != alg) or not _same_family(key, alg):
            raise TokenRefused("the token's algorithm does not fit its key")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                issuer=self.issuer,
                leeway=self.leeway,
                options={
                    "require": ["exp", "iss", "aud", "sub"],
                    "verify_iat": True,
                    "verify_aud": False,  # (below: in canonical form)
                },
            )
        except jwt.PyJWTError as exc:
            raise TokenRefused(_reason(exc)) from None
        if not names_audience(claims.get("aud"), self._audience):
            raise TokenRefused("the token is for another resource (aud)")
        return identity_of(claims, issuer=self.issuer)


def names_audience(aud: Any, resource: str) -> bool:
    """Whether a token's ``aud`` (a string or a list) names ``resource`` (canonical)."""
    named = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    for one in named:
        if isinstance(one, str) and len(one) <= 2048 and canonical_resource(one) == resource:
            return True
    return False


def _same_family(key: jwt.PyJWK, alg: str) -> bool:
    """Whether ``alg`` is of the key's type (an RSA key checks RS* and PS*, an EC key
    ES*, an OKP key EdDSA); a JWK that names its ``alg`` allows that one alone."""
    families = {"RSA": ("RS", "PS"), "EC": ("ES",), "OKP": ("EdDSA",)}
    return alg.startswith(families.get(str(key.key_type), ("-",)))


def _reason(exc: Exception) -> str:
    for kind, reason in _REASONS:
        if isinstance(exc, kind):
            return reason
    return "the token does not verify"


def identity_of(claims: dict[str, Any], *, issuer: str) -> Identity:
    """The :class:`Identity` of verified ``claims`` (a JWT's, or an introspection
    answer's): ``scope`` (space-separated, RFC 8693/9068) or ``scp`` (a list).

    A token with no ``sub`` that names its client (an introspection answer for a client
    credentials token) is that client's: RFC 9068 (section 2.2) makes ``sub`` the client
    id for such tokens, so the machine has the same principal whichever verifier saw it.
    """
    client_id = claims.get("client_id", claims.get("azp"))
    subject = claims.get("sub", client_id)
    if not isinstance(subject, str) or not subject:
        raise TokenRefused("the token names no subject (sub)")
    scope = claims.get("scope")
    if isinstance(scope, str):
        scopes = frozenset(scope.split())
    else:
        scp = claims.get("scp")
        scopes = (
            frozenset(s for s in scp if isinstance(s, str))
            if isinstance(scp, list)
            else frozenset()
        )
    aud = claims.get("aud")
    audience = (aud,) if isinstance(aud, str) else tuple(a for a in aud or () if isinstance(a, str))
    exp = claims.get("exp")
    return Identity(
        subject=subject,
        issuer=issuer,
        client_id=client_id if isinstance(client_id, str) else None,
        scopes=scopes,
        audience=audience,
        expires_at=float(exp) if isinstance(exp, int | float) else None,
        claims=claims,
    )
