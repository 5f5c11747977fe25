"""Where an app spends redeemed ``requestState`` tokens: at most one use of each.

The rule is the core's (``mrtr_core.server.HandlerContext.to_spend``): a leg that
redeems a sealed state spends that state's nonce, kept until the state expires,
before the handler acts, and a second spend is ``replayed``.  The core does no
I/O, so an app awaits its store here; a store shared by several processes (Redis,
a database) does its network round trip in ``consume`` without blocking the
event loop.

``consume`` must be atomic across every process that serves the same flows: it
records ``nonce`` until ``expires_at`` and returns True, or returns False when the
nonce was recorded before.  It may raise ``mrtr_core.server.NonceStoreFull``
(-32603) to refuse when it cannot record (fail closed: forgetting a spent nonce
would let a replay through).
"""

from __future__ import annotations

from typing import Protocol

import mrtr_core as m


class SingleUseStore(Protocol):
    """An async single-use store: the spent nonces of every process of a deployment."""

    async def consume(self, nonce: str, expires_at: float, now: float) -> bool: ...


class MemorySingleUse:
    """The in-process :class:`SingleUseStore`: the core's bounded ``MemoryNonceStore``.

    Right for one process; several processes need one shared store.
    """

    def __init__(self, max_entries: int = 100_000) -> None:
        self.nonces = m.server.MemoryNonceStore(max_entries)

    def __len__(self) -> int:
        return len(self.nonces)

    async def consume(self, nonce: str, expires_at: float, now: float) -> bool:
        return self.nonces.consume(nonce, expires_at, now)


__all__ = ["MemorySingleUse", "SingleUseStore"]
