"""The client's DPoP key (RFC 9449): a P-256 key pair made for one provider, and the
proofs it signs with PyJWT.  What a proof says is the core's
(``mrtr_core.auth._dpop``); this module only holds the key and signs.

The key lives in memory, with the provider: a DPoP-bound token kept in a file store
outlives it, and the next process meets a refusal and authorizes again.
"""

from __future__ import annotations

import secrets
from typing import Any

from mrtr_core.auth import _dpop

__all__ = ["ALGORITHMS", "DpopKey"]

#: The algorithms this client signs proofs with (one key type: P-256).
ALGORITHMS = ("ES256",)


class DpopKey:
    """An ES256 key pair and its proofs (``repr`` shows neither key)."""

    algorithm = "ES256"

    def __init__(self) -> None:
        import jwt
        from cryptography.hazmat.primitives.asymmetric import ec

        self._private = ec.generate_private_key(ec.SECP256R1())
        jwk: dict[str, Any] = jwt.algorithms.ECAlgorithm.to_jwk(
            self._private.public_key(), as_dict=True
        )
        self._header = _dpop.proof_header(jwk, self.algorithm)

    def __repr__(self) -> str:
        return "DpopKey(ES256)"

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
