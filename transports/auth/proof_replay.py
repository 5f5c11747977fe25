"""The DPoP proofs a resource server has seen (RFC 9449, section 11.1): a proof's
``jti`` is accepted once within the window its ``iat`` is accepted in, so each one
is kept until that window has passed, then forgotten.

Bounded: at most ``capacity`` proofs are kept.  When that many are still within
their window, a new proof is refused (the caller answers 503) rather than an older
one forgotten: forgetting would let that one be replayed.  Only a holder of good
tokens can fill it, and each entry is a 32-byte digest.

The memory is one process's: behind several workers (processes, hosts), a proof
replayed to another worker within its window is accepted there.  Such a deployment
pins a client to one worker or demands server nonces from a shared source.
"""

from __future__ import annotations

import hashlib

__all__ = ["SeenProofs"]


class SeenProofs:
    """The proofs seen within the last ``window`` seconds, ``capacity`` at most."""

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
        self._forget_until(now)
        digest = hashlib.sha256(f"{key_thumbprint}\x00{jti}".encode()).digest()
        if digest in self._until:
            return False
        if len(self._until) >= self.capacity:
            return None
        self._until[digest] = now + self.window
        return True

    def _forget_until(self, now: float) -> None:
        while self._until:
            oldest = next(iter(self._until))
            if self._until[oldest] > now:
                return
            del self._until[oldest]
