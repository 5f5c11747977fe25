"""What the endpoint holds open, and for whom: listen streams and sessions' streams.

Pools of their own, out of the host's connection slots, so that neither kind of
client can starve the other:

* ``ListenPool``: ``subscriptions/listen`` streams, long-lived by design, get
  their own pool of ``max_streams``, at most ``per_client`` of them for one
  client, each for at most ``lifetime`` seconds.  A refusal says when to come
  back: when the oldest of the streams in the way reaches its lifetime.
* ``SessionStreams``: the SSE streams of 2025-era sessions (a request's
  stream, which may wait minutes for a person to answer the legacy shim's
  question, and the GET streams): at most ``max_streams`` in all,
  ``per_session`` for one session and ``per_client`` for one client (its
  share, ``ClientShares``), so no session, and no number of one client's
  sessions, can take what other clients' requests need.  Past the session's
  bound or the pool's: 503; past the client's share: 429; each with
  ``Retry-After: 1``.

No I/O here: the endpoint asks, these answer; time is passed in.
"""

from __future__ import annotations

import math

import attrs

from .._shares import ClientShares, ShareRefusal

__all__ = ["Lease", "ListenPool", "ListenRefusal", "SessionStreams"]


@attrs.define(eq=False)
class Lease:
    """One listen stream's place in the pool, until ``deadline`` (the stream's lifetime)."""

    client: str
    deadline: float


@attrs.frozen
class ListenRefusal:
    """Why a listen stream was refused: the HTTP status, the seconds after which a
    place is sure to be free (``Retry-After``), and a message naming the setting."""

    status: int
    retry_after: int
    message: str


class ListenPool:
    """``subscriptions/listen`` streams: ``max_streams`` in all, ``per_client`` for one
    client, each ending ``lifetime`` seconds after it opened."""

    def __init__(self, max_streams: int, per_client: int, lifetime: float) -> None:
        self.max_streams = max_streams
        self.per_client = per_client
        self.lifetime = lifetime
        self._leases: dict[str, list[Lease]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def held_by(self, client: str) -> int:
        return len(self._leases.get(client, ()))

    def admit(self, client: str, now: float) -> Lease | ListenRefusal:
        """A place for one more stream of ``client``, or why not."""
        own = self._leases.get(client, [])
        if len(own) >= self.per_client:
            return ListenRefusal(
                429,
                _seconds_until(own, now),
                f"this client already holds {len(own)} subscriptions/listen streams "
                f"(max_listen_streams_per_client={self.per_client}): close one, or retry later",
            )
        if self._count >= self.max_streams:
            every = [lease for leases in self._leases.values() for lease in leases]
            return ListenRefusal(
                503,
                _seconds_until(every, now),
                f"the server holds max_listen_streams={self.max_streams} "
                "subscriptions/listen streams: retry later",
            )
        lease = Lease(client, now + self.lifetime)
        self._leases.setdefault(client, []).append(lease)
        self._count += 1
        return lease

    def release(self, lease: Lease) -> None:
        own = self._leases.get(lease.client, [])
        if lease in own:
            own.remove(lease)
            self._count -= 1
            if not own:
                del self._leases[lease.client]


def _seconds_until(leases: list[Lease], now: float) -> int:
    """Whole seconds until the first of ``leases`` ends (at least 1)."""
    return max(1, math.ceil(min(lease.deadline for lease in leases) - now))


class SessionStreams:
    """Open SSE streams of 2025-era sessions: ``max_streams`` in all, ``per_session``
    for one session, ``per_client`` for one client (whatever its sessions)."""

    def __init__(self, max_streams: int, per_session: int, per_client: int) -> None:
        self.per_session = per_session
        self.clients = ClientShares(
            max_streams,
            per_client,
            what="2025-era session streams",
            total_setting="max_session_streams",
            per_client_setting="max_session_streams_per_client",
        )
        self._held: dict[str, int] = {}  # by session

    @property
    def max_streams(self) -> int:
        return self.clients.total

    def __len__(self) -> int:
        return len(self.clients)

    def admit(self, session_id: str, client: str) -> ShareRefusal | None:
        """Take a place for one more stream of the session; or why not (nothing taken)."""
        own = self._held.get(session_id, 0)
        if own >= self.per_session:
            return ShareRefusal(
                503,
                f"this session already has {own} open streams "
                f"(max_streams_per_session={self.per_session}): retry when one ends",
            )
        refused = self.clients.admit(client)
        if refused is None:
            self._held[session_id] = own + 1
        return refused

    def release(self, session_id: str, client: str) -> None:
        own = self._held.get(session_id, 0)
        if own:
            self.clients.release(client)
            if own == 1:
                del self._held[session_id]
            else:
                self._held[session_id] = own - 1
