"""The client's DPoP key (RFC 9449): a P-256 key pair made for one provider, and the
proofs it signs with PyJWT.  What a proof says is the core's
(``mrtr_core.auth._dpop``); this module only holds the key and signs.

A token bound to the key is kept with it (the store holds the private key as a JWK,
:meth:`DpopKey.private_jwk`, read back by :meth:`DpopKey.from_private_jwk`), so a
later process proves with the key its stored token is bound to.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from mrtr_core.auth import _dpop

__all__ = ["ALGORITHMS", "DpopKey"]

#: The algorithms this client signs proofs with (one key type: P-256).
ALGORITHMS = ("ES256",)


class DpopKey:
    """An ES256 key pair and its proofs (``repr`` shows neither key)."""

    algorithm = "ES256"

    def __init__(self, private: Any = None) -> None:
        """A new key pair (``private``: an EC P-256 private key of ``cryptography``)."""
        import jwt
        from cryptography.hazmat.primitives.asymmetric import ec

        if private is None:
            private = ec.generate_private_key(ec.SECP256R1())
        self._private = private
        jwk: dict[str, Any] = jwt.algorithms.ECAlgorithm.to_jwk(
            self._private.public_key(), as_dict=True
        )
        self._header = _dpop.proof_header(jwk, self.algorithm)

    def __repr__(self) -> str:
        return "DpopKey(ES256)"

    @classmethod
    def from_private_jwk(cls, jwk: Mapping[str, Any]) -> DpopKey:
        """The key a :meth:`private_jwk` wrote; ``ValueError`` (quoting nothing of it)
        when it is not an EC P-256 private key."""
        import jwt
        from cryptography.hazmat.primitives.asymmetric import ec

        try:
            if jwk.get("kty") != "EC" or jwk.get("crv") != "P-256" or "d" not in jwk:
                raise ValueError
            private = jwt.algorithms.ECAlgorithm.from_jwk(dict(jwk))
        except Exception:  # (PyJWT's and cryptography's messages may quote the key)
            raise ValueError("not an EC P-256 private JWK") from None
        if not isinstance(private, ec.EllipticCurvePrivateKey):
            raise ValueError("not an EC P-256 private JWK")
        return cls(private)

    def private_jwk(self) -> dict[str, Any]:
        """The private key as a JWK (RFC 7517), for a token store: a secret."""
        import jwt

        jwk: dict[str, Any] = jwt.algorithms.ECAlgorithm.to_jwk(self._private, as_dict=True)
        return jwk

    @property
    def public_jwk(self) -> dict[str, Any]:
        jwk: dict[str, Any] = self._header["jwk"]
        return jwk

    def proof(
        self,
        method: str,
        url: str,
        *,
        now: float,
        nonce: str | None = None,
        access_token: str | None = None,
    ) -> str:
        """The ``DPoP`` header's value for one request (a fresh ``jti`` each)."""
        import jwt

        claims = _dpop.proof_claims(
            method=method,
            url=url,
            now=now,
            jti=secrets.token_urlsafe(16),
            nonce=nonce,
            access_token=access_token,
        )
        headers = {k: v for k, v in self._header.items() if k != "alg"}
        return jwt.encode(claims, self._private, algorithm=self.algorithm, headers=headers)
