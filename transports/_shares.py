"""Shared pools and each client's share of them: the one rule every pool follows.

A pool the server holds for all its clients (2025 sessions, their GET streams,
listen streams, WebSocket connections, pending URL interactions, single-use
entries, continuations) has a bound, ``total``; one client alone must reach a
bound of its own, ``per_client``, long before that, so that filling the pool
takes many clients and no single one can lock the others out.  A client is
whoever :func:`client_key` names: the principal where one is known, the peer
address otherwise (behind a trusted proxy, the address the proxy reports).
The one client of a connection that has only one (stdio, an in-memory link:
``LOCAL_CLIENT``) has no other to leave room for: its share is the whole pool.

A refusal says which bound it met: 429 when the client is past its own share
(it can free one of its own places), 503 when the pool is full (nobody can, but
time); either way its message names the setting to raise.

No I/O and no clock here: the pools' owners ask, these answer.
"""

from __future__ import annotations

import contextvars
from typing import TypeVar

import attrs

import mrtr_core as m

E = TypeVar("E", bound=m.MrtrError)

__all__ = ["CURRENT_CLIENT", "LOCAL_CLIENT", "ClientShares", "ShareRefusal", "client_key"]


@attrs.frozen
class ShareRefusal:
    """Why one more place was refused: the HTTP status (429: the client's own share;
    503: the whole pool) and a message naming the setting."""

    status: int
    message: str

    @classmethod
    def for_own_share(cls, held: int, what: str, setting: str, share: int) -> ShareRefusal:
        """429: the client holds ``held`` ``what``, its share (``setting=share``).  (Also
        for a pool whose count lives elsewhere, e.g. in Redis.)"""
        return cls(
            429,
            f"this client already holds {held} {what} ({setting}={share}): end one, or retry later",
        )

    @classmethod
    def for_full_pool(cls, what: str, setting: str, total: int) -> ShareRefusal:
        """503: the pool holds its bound of ``what`` (``setting=total``).  (Also for a
        pool whose count lives elsewhere, e.g. in Redis.)"""
        return cls(503, f"the server holds {setting}={total} {what}: retry later")

    @property
    def own_share(self) -> bool:
        """Whether the client met its own share (not the pool's bound)."""
        return self.status == 429

    def error(self, kind: type[E] = m.MrtrError) -> E:  # type: ignore[assignment]
        """The refusal as a JSON-RPC error of class ``kind``, for a pool a request fills (a
        store an app's handler writes to): -32000 "come back later", not -32603, and
        which bound it met (``data.reason``: ``own_share`` or ``pool_full``)."""
        return kind(
            self.message,
            code=m.ErrorCode.SERVER_BUSY,
            data={"reason": "own_share" if self.own_share else "pool_full"},
        )


def client_key(principal: str | None, peer: str | None) -> str:
    """Whose share a place counts against: the principal when one is known, else
    the peer address (``"unknown"`` when the host gives none)."""
    if principal:
        return f"principal:{principal}"
    return f"peer:{peer or 'unknown'}"


#: The one client of a connection that has only one (stdio).
LOCAL_CLIENT = client_key(None, "local")

#: Who sent the request being served, as :func:`client_key` names it: set by the
#: endpoint for each HTTP request and WebSocket, read by the stores an app's handlers
#: fill (``Context.client``).  Over stdio the one connection is the one client: the
#: default.
CURRENT_CLIENT: contextvars.ContextVar[str] = contextvars.ContextVar(
    "mrtr_client", default=LOCAL_CLIENT
)


class ClientShares:
    """``total`` places in all, at most ``per_client`` for one client.

    ``what`` names a place in messages ("2025 sessions"); ``total_setting`` and
    ``per_client_setting`` name the settings a refusal tells the operator to raise.
    """

    def __init__(
        self,
        total: int,
        per_client: int,
        *,
        what: str,
        total_setting: str,
        per_client_setting: str,
    ) -> None:
        if total < 1 or per_client < 1:
            raise ValueError(f"{total_setting} and {per_client_setting} must be at least 1")
        self.total = total
        self.per_client = min(per_client, total)
        self.what = what
        self.total_setting = total_setting
        self.per_client_setting = per_client_setting
        self._held: dict[str, int] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def held_by(self, client: str) -> int:
        return self._held.get(client, 0)

    def clients(self) -> int:
        """How many clients hold at least one place."""
        return len(self._held)

    def refusal(self, client: str) -> ShareRefusal | None:
        """Why ``client`` may not take one more place now, or ``None`` if it may."""
        own = self._held.get(client, 0)
        # The one client of a connection that has only one (stdio, in memory) has no
        # one to leave room for: the pool's bound is its share.
        if own >= self.per_client and client != LOCAL_CLIENT:
            return ShareRefusal.for_own_share(
                own, self.what, self.per_client_setting, self.per_client
            )
        if self._count >= self.total:
            return ShareRefusal.for_full_pool(self.what, self.total_setting, self.total)
        return None

    def admit(self, client: str) -> ShareRefusal | None:
        """Take one place for ``client``; or why not (and nothing is taken)."""
        refused = self.refusal(client)
        if refused is None:
            self._held[client] = self._held.get(client, 0) + 1
            self._count += 1
        return refused

    def release(self, client: str) -> None:
        """Give back one of ``client``'s places (nothing if it holds none)."""
        own = self._held.get(client, 0)
        if not own:
            return
        self._count -= 1
        if own == 1:
            del self._held[client]
        else:
            self._held[client] = own - 1
