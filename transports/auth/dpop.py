"""DPoP-bound tokens at the resource server (RFC 9449, section 7): :class:`Dpop`, the
policy ``ResourceAuth(..., dpop=Dpop())`` takes, and the check of one request's proof.

The rules are the core's (``mrtr_core.auth._dpop_proof``); this module verifies the
proof's signature with PyJWT, by the public key the proof carries, keeps the proofs
seen (``proof_replay.py``) and reads the clock.  A request with ``Authorization:
DPoP <token>`` is accepted when its one ``DPoP`` header is a proof that

* is signed with an algorithm of ``algorithms`` by the key the token is bound to
  (``cnf.jkt``, from the JWT or the introspection answer);
* names this request's method and URL (``htm``, ``htu``), and the token (``ath``);
* was issued at most ``max_age`` seconds ago (``iat``; ``skew`` seconds ahead of our
  clock at most) and not seen before (``jti``), by this process or, with
  ``seen_proofs=RedisProofMemory(...)``, by any worker that shares that memory;
* with ``nonces=True``, carries a nonce this server gave (RFC 9449, section 9): a proof
  without one is answered 401 ``use_dpop_nonce`` with the nonce in ``DPoP-Nonce``, and
  the client signs again with it.  A nonce is the HMAC of the current period (``max_age``
  seconds; the previous period's is still good) under ``nonce_secret``: nothing is kept,
  and workers that share the secret accept each other's nonces.  A proof can then not
  be made ahead of time, only within a nonce's life.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from mrtr_core.auth import _dpop
from mrtr_core.auth import _dpop_proof as rules

from .proof_replay import ProofMemory, ProofsFull, SeenProofs, proof_digest

__all__ = ["DEFAULT_ALGORITHMS", "Dpop", "ProofsFull"]

#: The algorithms proofs may be signed with unless told: the asymmetric ones clients
#: sign with (the core refuses ``none`` and HMAC whatever is listed).
DEFAULT_ALGORITHMS: Final = ("ES256", "RS256", "PS256", "EdDSA")
#: The longest ``DPoP`` header read (a proof carries its public key in its header).
MAX_PROOF_LENGTH: Final = 8 * 1024
#: The smallest RSA key a proof may be signed with.
MIN_RSA_BITS: Final = 2048


class Dpop:
    """Accept DPoP-bound tokens (and, unless ``required``, bearer ones beside them).

    ``algorithms``: what proofs may be signed with (published as the metadata's
    ``dpop_signing_alg_values_supported``); ``max_age`` and ``skew``: the window of a
    proof's ``iat`` around ``clock()``; ``max_proofs``: the replay memory's bound;
    ``seen_proofs``: where the proofs seen are kept (``proof_replay.ProofMemory``;
    default: this process's ``SeenProofs`` of ``max_proofs``); ``nonces``: demand a
    nonce of ours in each proof, made with ``nonce_secret`` (32 random bytes per
    process unless given: give the same to every worker)."""

    def __init__(
        self,
        *,
        required: bool = False,
        algorithms: Iterable[str] = DEFAULT_ALGORITHMS,
        max_age: float = 60.0,
        skew: float = 10.0,
        max_proofs: int = 65536,
        seen_proofs: ProofMemory | None = None,
        nonces: bool = False,
        nonce_secret: bytes | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.algorithms = tuple(algorithms)
        wrong = [a for a in self.algorithms if a not in _dpop._ASYMMETRIC]
        if wrong or not self.algorithms:
            raise ValueError(f"DPoP algorithms are asymmetric ones, not {wrong or 'none at all'}")
        if not 0 < max_age <= 600 or not 0 <= skew <= 300:
            raise ValueError("max_age is up to 600 seconds, skew up to 300")
        self.required = required
        self.max_age = max_age
        self.skew = skew
        self.clock = clock
        #: How long a proof is kept: as long as its ``iat`` is accepted.
        self.window = max_age + skew
        if seen_proofs is None:  # (not `or`: an empty SeenProofs is falsy)
            seen_proofs = SeenProofs(window=self.window, capacity=max_proofs)
        self.seen: ProofMemory = seen_proofs
        if nonce_secret is not None and len(nonce_secret) < 16:
            raise ValueError("a nonce secret is 16 bytes at least")
        self.nonces = nonces
        self._nonce_secret = nonce_secret or secrets.token_bytes(32)

    def __repr__(self) -> str:
        mode = "required" if self.required else "allowed"
        return f"Dpop({mode}, algorithms={self.algorithms!r}, nonces={self.nonces})"

    def nonce(self, now: float | None = None) -> str:
        """The nonce proofs carry now (``DPoP-Nonce``)."""
        return self._nonce_of(int((self.clock() if now is None else now) // self.max_age))

    def _nonce_of(self, period: int) -> str:
        mac = hmac.new(self._nonce_secret, str(period).encode(), hashlib.sha256).digest()
        return f"{period}.{base64.urlsafe_b64encode(mac[:18]).decode()}"

    def _good_nonces(self, now: float) -> tuple[str, ...] | None:
        if not self.nonces:
            return None
        period = int(now // self.max_age)
        return (self._nonce_of(period), self._nonce_of(period - 1))

    def metadata(self) -> dict[str, Any]:
        """The protected-resource metadata's DPoP fields (RFC 9728, section 2)."""
        fields: dict[str, Any] = {"dpop_signing_alg_values_supported": list(self.algorithms)}
        if self.required:
            fields["dpop_bound_access_tokens_required"] = True
        return fields

    async def check(
        self,
        proofs: Sequence[str],
        *,
        token: str,
        bound_to: str | None,
        method: str,
        urls: Iterable[str],
    ) -> None:
        """Check the request's ``DPoP`` header values ``proofs`` for ``token`` (bound to
        the thumbprint ``bound_to``); ``rules.InvalidProof``, or ``ProofNotChecked``
        (``ProofsFull``, ``ProofMemoryUnavailable``) when its memory cannot tell."""
        if len(proofs) != 1:
            raise rules.InvalidProof("a request with a DPoP token carries one DPoP proof")
        (proof,) = proofs
        if len(proof) > MAX_PROOF_LENGTH:
            raise rules.InvalidProof(f"the DPoP proof is longer than {MAX_PROOF_LENGTH}")
        key = rules.proof_key(proof, algorithms=self.algorithms)
        claims = _verified_claims(proof, key)
        now = self.clock()
        jti = rules.check_proof_claims(
            claims,
            method=method,
            urls=urls,
            now=now,
            max_age=self.max_age,
            skew=self.skew,
            access_token=token,
            nonces=self._good_nonces(now),
        )
        rules.check_binding(key, bound_to)
        digest = proof_digest(key.thumbprint, jti)
        if not await self.seen.claim(digest, until=now + self.window, now=now):
            raise rules.InvalidProof("the DPoP proof was used before (jti)")


def _verified_claims(proof: str, key: rules.ProofKey) -> dict[str, Any]:
    """The proof's claims, its signature verified by its own ``jwk`` (PyJWT)."""
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    try:
        public = jwt.PyJWK(dict(key.jwk), algorithm=key.algorithm).key
    except jwt.PyJWTError:
        raise rules.InvalidProof("the DPoP proof's jwk is not a usable public key") from None
    if isinstance(public, rsa.RSAPublicKey) and public.key_size < MIN_RSA_BITS:
        raise rules.InvalidProof(f"the DPoP proof's RSA key is shorter than {MIN_RSA_BITS}")
    try:
        claims: dict[str, Any] = jwt.decode(
            proof,
            key=public,
            algorithms=[key.algorithm],
            options={
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,  # (the core's window, by the caller's clock)
                "verify_aud": False,
                "verify_iss": False,
            },
        )
    except jwt.InvalidSignatureError:
        raise rules.InvalidProof("the DPoP proof's signature does not verify") from None
    except jwt.PyJWTError:
        raise rules.InvalidProof("the DPoP proof is not a well-formed JWT") from None
    return claims
