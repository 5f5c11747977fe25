"""What the host holds open: connection slots, and who gives one up to a newcomer.

``ConnectionSlots``: at most ``max_connections`` connections that carry
ordinary requests.  A connection is *waiting* while it has no whole request
to work on (a fresh connection, a head or body still arriving, a
kept-alive connection between requests) and *busy* while its request runs.
When every slot is taken, a newcomer evicts the connection that has waited
longest, a *kept-alive* one first (answered, and nothing of its next
request yet), but only one idle for ``KEPT_ALIVE_GRACE`` at least: a
kept-alive connection is one its client was told it may reuse, and a client
in the middle of a flow sends its next leg on it at once, so a young one
closed under it would race that leg (the leg lost, or reset); only when no
connection may be evicted is the newcomer refused (503).  And a response
written while every slot is taken promises no reuse (``full``: the host
says ``Connection: close``), so under pressure connections turn over
instead of idling in slots.  So sockets that trickle a head a byte
at a time, or that just sit there, can delay nobody: each new connection
pushes the oldest of them out, and a real client, which sends its request
at once, is always the youngest.  (Only connections that have had a request
answered go first: a flood of fresh connections cannot shield tricklers.)

No I/O here: the host's connections say where they are (``connection.py``).
The endpoint's own pools (listen streams, sessions' streams) are the endpoint's
(``mrtr_transports.asgi.pools``).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Protocol

__all__ = ["KEPT_ALIVE_GRACE", "ConnectionSlots", "Evictable"]

#: Seconds a kept-alive connection keeps its slot from newcomers: longer than a client
#: takes to send its next leg, far shorter than the idle timeout a squatter would get.
KEPT_ALIVE_GRACE = 2.0


class Evictable(Protocol):
    """A connection, as its slot sees it."""

    def evict(self) -> None:
        """Close now: a newer connection needs the slot."""


class ConnectionSlots:
    """``limit`` connection slots; waiting connections give theirs up to newcomers."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        #: Answered connections with nothing of their next request yet, oldest first,
        #: with the time each was answered.
        self._kept_alive: OrderedDict[Evictable, float] = OrderedDict()
        #: Other waiting connections (fresh, or a request arriving), oldest first.
        self._waiting: OrderedDict[Evictable, None] = OrderedDict()
        self._busy: set[Evictable] = set()

    def __len__(self) -> int:
        return len(self._kept_alive) + len(self._waiting) + len(self._busy)

    def __contains__(self, connection: Evictable) -> bool:
        return (
            connection in self._kept_alive
            or connection in self._waiting
            or connection in self._busy
        )

    @property
    def full(self) -> bool:
        """Every slot is taken: a response now promises no reuse of its connection."""
        return len(self) >= self.limit

    def admit(self, connection: Evictable, now: float = math.inf) -> bool:
        """Give ``connection`` a slot (waiting), evicting the longest waiter if need be,
        a kept-alive one idle for ``KEPT_ALIVE_GRACE`` first; ``False`` when none may be
        evicted.  (``now``: the host's clock; without it, every kept-alive connection is
        past its grace.)"""
        if len(self) >= self.limit:
            kept = next(iter(self._kept_alive.items()), None)
            if kept is not None and now - kept[1] >= KEPT_ALIVE_GRACE:
                evicted = kept[0]
                del self._kept_alive[evicted]
            elif self._waiting:
                evicted, _ = self._waiting.popitem(last=False)
            else:
                return False
            evicted.evict()
        self._waiting[connection] = None
        return True

    def arriving(self, connection: Evictable) -> None:
        """The first bytes of a kept-alive connection's next request: it waits as others do."""
        if connection in self._kept_alive:
            del self._kept_alive[connection]
            self._waiting[connection] = None

    def busy(self, connection: Evictable) -> None:
        """A whole request has arrived: its connection may not be evicted until answered."""
        for waiters in (self._waiting, self._kept_alive):
            if connection in waiters:  # not if it was evicted meanwhile
                del waiters[connection]
                self._busy.add(connection)

    def waiting(self, connection: Evictable, now: float = 0.0) -> None:
        """Answered at ``now``: the connection waits for its next request, kept alive,
        the youngest."""
        if connection in self._busy:
            self._busy.discard(connection)
            self._kept_alive[connection] = now

    def release(self, connection: Evictable) -> None:
        """The connection is closed, or has left for the listen pool (idempotent)."""
        self._kept_alive.pop(connection, None)
        self._waiting.pop(connection, None)
        self._busy.discard(connection)
