"""Signing a ``private_key_jwt`` client assertion (RFC 7523) with PyJWT.

The claims are the core's (``client_assertion_claims``); the signature is JOSE, from
a well-kept library rather than written here: PyJWT on ``cryptography``, the same one
the resource server verifies tokens with (``mrtr_transports.auth``), imported only
when a client signs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["sign_client_assertion"]

#: The asymmetric algorithms a client assertion may use, and each one's key family.
_KEY_FAMILIES: dict[str, str] = {
    "ES256": "EC",
    "ES384": "EC",
    "ES512": "EC",
    "RS256": "RSA",
    "RS384": "RSA",
    "RS512": "RSA",
    "PS256": "RSA",
    "PS384": "RSA",
    "PS512": "RSA",
    "EdDSA": "OKP",
}


def sign_client_assertion(claims: dict[str, Any], private_key_pem: str, algorithm: str) -> str:
    """The compact JWS of ``claims``, signed with the PEM private key (``ValueError``
    for an algorithm outside the asymmetric allow-list, or a key that does not fit)."""
    family = _KEY_FAMILIES.get(algorithm)
    if family is None:
        raise ValueError(f"unsupported client assertion algorithm {algorithm!r}")
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(private_key_pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError("the client assertion key is not an unencrypted PEM private key") from exc
    signing = (
        ec.EllipticCurvePrivateKey,
        rsa.RSAPrivateKey,
        ed25519.Ed25519PrivateKey,
        ed448.Ed448PrivateKey,
    )
    if not isinstance(key, signing):
        raise ValueError(f"a {algorithm} client assertion needs an {family} key")
    own = (
        "EC"
        if isinstance(key, ec.EllipticCurvePrivateKey)
        else "RSA"
        if isinstance(key, rsa.RSAPrivateKey)
        else "OKP"
    )
    if own != family:
        raise ValueError(f"a {algorithm} client assertion needs an {family} key")
    return jwt.encode(claims, key, algorithm=algorithm, headers={"typ": "JWT"})
