"""Signing a ``private_key_jwt`` client assertion (RFC 7523) with ``joserfc``.

The claims are the core's (``client_assertion_claims``); the signature is JOSE, from
a well-kept library rather than written here.  ``joserfc`` (on ``cryptography``) is
imported only when a client signs, so the transports need it only where a machine
client authenticates with a key (the ``oauth`` extra).
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["sign_client_assertion"]

#: The asymmetric algorithms a client assertion may use, and each one's key type.
_KEY_TYPES: dict[str, Literal["EC", "RSA", "OKP"]] = {
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
    key_type = _KEY_TYPES.get(algorithm)
    if key_type is None:
        raise ValueError(f"unsupported client assertion algorithm {algorithm!r}")
    from joserfc import jwt
    from joserfc.jwk import import_key

    key = import_key(private_key_pem, key_type)
    return jwt.encode({"alg": algorithm, "typ": "JWT"}, claims, key, algorithms=[algorithm])
