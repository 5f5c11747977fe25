"""The DPoP proofs a resource server has seen (RFC 9449, section 11.1): a proof's
``jti`` is accepted once within the window its ``iat`` is accepted in, so each one
is kept until that window has passed, then forgotten.

Where they are kept is pluggable: :class:`ProofMemory` is the one question ``Dpop``
asks ("claim this proof until T: False if it was claimed before").  Two answer it:

* :class:`SeenProofs` (the default): one process's memory.  Behind several workers
  (processes, hosts), a proof replayed to another worker within its window is
  accepted there;
* ``mrtr_transports.stores.redis_proofs.RedisProofMemory``: one Redis every worker
  shares (``mrtr serve --auth-dpop --single-use redis://...``), so a proof is good
  once across all of them.

A proof is named by :func:`proof_digest` (SHA-256 of the key's thumbprint and the
``jti``), never by the ``jti`` itself: what is kept is 32 bytes whatever the client
sent, and a store's keys say nothing of the proofs.

Bounded: :class:`SeenProofs` keeps ``capacity`` proofs at most.  When that many are
still within their window, a new proof is refused (:class:`ProofsFull`, the caller
answers 503) rather than an older one forgotten: forgetting would let that one be
replayed.  Only a holder of good tokens can fill it.  A memory that cannot answer
(:class:`ProofMemoryUnavailable`: Redis down) refuses too: a proof is never accepted
unchecked.
"""

from __future__ import annotations

import hashlib
from typing import Protocol

__all__ = [
    "ProofMemory",
    "ProofMemoryUnavailable",
    "ProofNotChecked",
    "ProofsFull",
    "SeenProofs",
    "proof_digest",
]


class ProofNotChecked(Exception):
    """Whether the proof was seen before cannot be told now: the request is refused
    (503, retry) rather than the proof accepted unchecked."""


class ProofsFull(ProofNotChecked):
    """As many proofs as this server keeps are still within their window: the request
    is refused (503) rather than a kept proof forgotten, which would let it be replayed."""


class ProofMemoryUnavailable(ProofNotChecked):
    """The shared memory of proofs did not answer (fail closed: the proof is refused)."""


def proof_digest(key_thumbprint: str, jti: str) -> bytes:
    """What a proof is kept as: the SHA-256 of its key's thumbprint and its ``jti``
    (another key's proof may carry the same ``jti``)."""
    return hashlib.sha256(f"{key_thumbprint}\x00{jti}".encode()).digest()


class ProofMemory(Protocol):
    """Where a resource server keeps the proofs it has seen."""

    async def claim(self, digest: bytes, *, until: float, now: float) -> bool:
        """Claim the proof ``digest`` (:func:`proof_digest`) until ``until`` (seconds
        since the epoch, by the caller's clock ``now``): ``True`` the first time,
        ``False`` when it was claimed before and that claim has not run out.

        Raises :class:`ProofNotChecked` (:class:`ProofsFull`,
        :class:`ProofMemoryUnavailable`) when it cannot tell: nothing is claimed."""
        ...


class SeenProofs:
    """The proofs seen within the last ``window`` seconds, ``capacity`` at most, in this
    process (a :class:`ProofMemory`)."""

    def __init__(self, *, window: float, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity is at least one proof")
        self.window = window
        self.capacity = capacity
        # digest -> when it may be forgotten; insertion order is that order, as the
        # clock the caller passes does not go back by more than a window.
        self._until: dict[bytes, float] = {}

    def __len__(self) -> int:
        return len(self._until)

    def first_use(self, key_thumbprint: str, jti: str, now: float) -> bool | None:
        """Record the proof ``jti`` of the key ``key_thumbprint``: ``True`` the first
        time, ``False`` for a replay, ``None`` when full (nothing recorded)."""
        try:
            return self._record(proof_digest(key_thumbprint, jti), now + self.window, now)
        except ProofsFull:
            return None

    async def claim(self, digest: bytes, *, until: float, now: float) -> bool:
        """:meth:`ProofMemory.claim`; :class:`ProofsFull` when ``capacity`` proofs are
        still within their window.  ``until - now`` is the same window at every claim
        (``Dpop``'s), so the order claims come in is the order they run out."""
        return self._record(digest, until, now)

    def _record(self, digest: bytes, until: float, now: float) -> bool:
        self._forget_until(now)
        if digest in self._until:
            return False
        if len(self._until) >= self.capacity:
            raise ProofsFull("too many recent DPoP proofs to remember another: retry")
        self._until[digest] = until
        return True

    def _forget_until(self, now: float) -> None:
        while self._until:
            oldest = next(iter(self._until))
            if self._until[oldest] > now:
                return
            del self._until[oldest]
