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

Every client has a share of the store (``mrtr_transports._shares``): ``client``
names whose spend this is (``Context.client``), and a client that holds
``max_per_client`` unexpired entries is refused (-32000, the bound named) before
its spend is recorded, so one client running flows in a loop fills its own share,
not the store every other client's flows need.
"""

from __future__ import annotations

import heapq
from typing import Protocol

import mrtr_core as m

from .._shares import CURRENT_CLIENT, ClientShares

#: The store's bound, and one client's share of it.
DEFAULT_MAX_SINGLE_USE = 100_000
#: A quarter: at the 600 s state lifetime, 41 two-leg flows a second, sustained, for one
#: client (a busy agent host, or many users behind one address) before it meets its share.
DEFAULT_MAX_SINGLE_USE_PER_CLIENT = 25_000
#: What a refusal calls an entry, and the settings it names (every store says the same).
ENTRIES = "single-use entries (spent requestStates, kept until they expire)"
TOTAL_SETTING = "single-use max_entries"
PER_CLIENT_SETTING = "single-use max_per_client"


class SingleUseStore(Protocol):
    """An async single-use store: the spent nonces of every process of a deployment."""

    async def consume(self, nonce: str, expires_at: float, now: float, *, client: str) -> bool: ...


class MemorySingleUse:
    """The in-process :class:`SingleUseStore`: the core's bounded ``MemoryNonceStore``,
    ``max_entries`` in all, at most ``max_per_client`` of one client.

    Right for one process; several processes need one shared store.
    """

    def __init__(
        self,
        max_entries: int = DEFAULT_MAX_SINGLE_USE,
        *,
        max_per_client: int = DEFAULT_MAX_SINGLE_USE_PER_CLIENT,
    ) -> None:
        self.nonces = m.server.MemoryNonceStore(max_entries)
        self.shares = ClientShares(
            max_entries,
            max_per_client,
            what=ENTRIES,
            total_setting=TOTAL_SETTING,
            per_client_setting=PER_CLIENT_SETTING,
        )
        #: (expires_at, client) of every entry recorded: whose share it frees, and when.
        self._expiries: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self.nonces)

    async def consume(
        self, nonce: str, expires_at: float, now: float, *, client: str | None = None
    ) -> bool:
        client = client if client is not None else CURRENT_CLIENT.get()
        expiries = self._expiries
        while expiries and expiries[0][0] < now:  # (the core's store drops them alike)
            self.shares.release(heapq.heappop(expiries)[1])
        refused = self.shares.refusal(client)
        if refused is not None:
            raise refused.error(m.server.NonceStoreFull)
        first = self.nonces.consume(nonce, expires_at, now)
        if first:
            self.shares.admit(client)
            heapq.heappush(expiries, (expires_at, client))
        return first


__all__ = [
    "DEFAULT_MAX_SINGLE_USE",
    "DEFAULT_MAX_SINGLE_USE_PER_CLIENT",
    "MemorySingleUse",
    "SingleUseStore",
]
