"""Request bookkeeping: our requests waiting for their answers, the peer's waiting for ours.

Each record names its kind with an enum, so what a response means is decided
by one ``match`` on a closed set, not by comparing strings.  A request of the
peer's moves through a small lifecycle table, like the session: handed out,
then answered; or handed out, cancelled by the peer, then answered with
nothing on the wire.  A request refused in ``next_event`` is owed exactly one
error reply.  Every move goes through :data:`INCOMING_LIFECYCLE`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from .._errors import LocalProtocolError
from .._meta import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    RequestInfo,
)
from ..wire._model import RequestId
from ._handshake import Agreement


class OutgoingKind(enum.Enum):
    """What one of our requests is, and so where its answer goes."""

    PLAIN = "plain"  # the app's own request: the answer goes to the app
    LEG = "leg"  # one leg of a call: the answer goes to the call's round engine
    DISCOVER = "discover"  # the client's server/discover probe
    INITIALIZE = "initialize"  # the client's 2025-era initialize


class IncomingKind(enum.Enum):
    """Who answers one of the peer's requests."""

    APP = "app"  # handed to the app
    AUTO = "auto"  # answered by the connection (server/discover, ping)
    INITIALIZE = "initialize"  # answered by the connection; the answer moves the session


class IncomingState(enum.Enum):
    __hash__ = object.__hash__

    HANDED_OUT = "handed_out"  # waiting for its answer
    CANCELLED = "cancelled"  # the peer gave up on it: its answer goes nowhere
    REFUSED = "refused"  # refused as it arrived: the error reply handed out is owed
    ANSWERED = "answered"  # answered (or ended): its id is free again


class IncomingInput(enum.Enum):
    __hash__ = object.__hash__

    PEER_CANCELLED = "peer_cancelled"  # notifications/cancelled, or its response stream closed
    SEND_RESULT = "send_result"
    SEND_ERROR = "send_error"
    SEND_NOTICE = "send_notice"  # progress or a log message for it
    END = "end"  # we end it without an answer (a 2026 subscriptions/listen stream)


_IS = IncomingState
_II = IncomingInput

#: A missing pair is refused: a late cancel is ignored, a notice for a cancelled
#: request sends nothing, a result in place of an owed error reply is misuse.
INCOMING_LIFECYCLE: Mapping[tuple[IncomingState, IncomingInput], IncomingState] = {
    (_IS.HANDED_OUT, _II.PEER_CANCELLED): _IS.CANCELLED,
    (_IS.HANDED_OUT, _II.SEND_RESULT): _IS.ANSWERED,
    (_IS.HANDED_OUT, _II.SEND_ERROR): _IS.ANSWERED,
    (_IS.HANDED_OUT, _II.SEND_NOTICE): _IS.HANDED_OUT,
    (_IS.HANDED_OUT, _II.END): _IS.ANSWERED,
    # The app still sends its outcome: that releases the id, and nothing goes out.
    (_IS.CANCELLED, _II.SEND_RESULT): _IS.ANSWERED,
    (_IS.CANCELLED, _II.SEND_ERROR): _IS.ANSWERED,
    (_IS.CANCELLED, _II.END): _IS.ANSWERED,
    (_IS.REFUSED, _II.SEND_ERROR): _IS.ANSWERED,
}


class Outgoing:
    """One of our requests waiting for its answer."""

    __slots__ = ("call", "kind", "method")

    def __init__(self, kind: OutgoingKind, method: str, call: int | None = None) -> None:
        self.kind = kind
        self.method = method
        self.call = call


class Incoming:
    """One of the peer's requests, handed out and not yet answered."""

    __slots__ = ("info", "kind", "method", "progress_token", "state")

    def __init__(
        self,
        kind: IncomingKind,
        method: str,
        info: RequestInfo | None = None,
        progress_token: str | int | None = None,
    ) -> None:
        self.kind = kind
        self.method = method
        self.info = info
        self.progress_token = progress_token
        self.state = IncomingState.HANDED_OUT

    def allows(self, given: IncomingInput) -> bool:
        return (self.state, given) in INCOMING_LIFECYCLE

    def move(self, given: IncomingInput) -> None:
        """Apply an input the caller has checked (or knows) the table allows."""
        self.state = INCOMING_LIFECYCLE[(self.state, given)]


class BoundedSet:
    """Insertion-ordered set that forgets its oldest member past ``limit``."""

    __slots__ = ("_items", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._items: dict[RequestId, None] = {}

    def add(self, item: RequestId) -> None:
        self._items[item] = None
        if len(self._items) > self.limit:
            del self._items[next(iter(self._items))]

    def discard(self, item: RequestId) -> bool:
        return self._items.pop(item, 0) is None

    def __contains__(self, item: object) -> bool:
        return item in self._items


class OutgoingTable:
    """Our requests in flight, and the ids we gave up on (so a late answer is dropped)."""

    __slots__ = ("_next_id", "finished", "max_outgoing", "requests")

    def __init__(self, max_outgoing: int, max_finished_ids: int) -> None:
        self.max_outgoing = max_outgoing
        self.requests: dict[RequestId, Outgoing] = {}
        self.finished = BoundedSet(max_finished_ids)
        self._next_id = 1

    def new_id(self) -> int:
        """A request id not in use and not recently abandoned."""
        finished = self.finished._items  # (this module's own set: no method call per id)
        while self._next_id in self.requests or self._next_id in finished:
            self._next_id += 1
        rid = self._next_id
        self._next_id += 1
        return rid

    def check_room(self) -> None:
        if len(self.requests) >= self.max_outgoing:
            raise LocalProtocolError(
                f"more than max_outgoing={self.max_outgoing} requests in flight"
            )

    def add(self, rid: RequestId, kind: OutgoingKind, method: str, call: int | None = None) -> None:
        self.requests[rid] = Outgoing(kind, method, call)

    def abandon(self, rid: RequestId) -> None:
        """We no longer wait for ``rid`` (sent or not): its late answer is dropped quietly."""
        self.requests.pop(rid, None)
        self.finished.add(rid)


class MetaStamp:
    """Puts the 2026-07-28 ``_meta`` every client request carries on a copy of its params."""

    __slots__ = ("_agreement", "_capabilities", "_info", "_log_level")

    def __init__(
        self,
        agreement: Agreement,
        capabilities: Mapping[str, Any],
        info: Mapping[str, Any] | None,
        log_level: str | None,
    ) -> None:
        self._agreement = agreement
        self._capabilities = capabilities
        self._info = info
        self._log_level = log_level

    def __call__(
        self,
        params: Mapping[str, Any] | None,
        capabilities: Mapping[str, Any] | None,
        *,
        modern: bool = False,
    ) -> dict[str, Any]:
        """A copy of ``params`` with ``_meta`` stamped (nothing added on a 2025-era session
        unless ``modern``: the probe).  ``_meta`` is copied, never changed."""
        out = dict(params) if params is not None else {}
        meta = self.meta(out.get("_meta"), capabilities, modern=modern)
        if meta is not None:
            out["_meta"] = meta
        return out

    @property
    def key(self) -> tuple[str | None, str | None]:
        """What :meth:`meta` depends on besides its arguments: era and version."""
        return self._agreement.era, self._agreement.protocol_version

    def meta(
        self, given: Any, capabilities: Mapping[str, Any] | None, *, modern: bool = False
    ) -> dict[str, Any] | None:
        """The ``_meta`` that replaces ``given`` (the params' own, copied, never changed),
        or ``None`` when nothing is stamped (a 2025-era session, unless ``modern``)."""
        if self._agreement.era != "modern" and not modern:
            return None
        meta = dict(given) if isinstance(given, Mapping) else {}
        meta[META_PROTOCOL_VERSION] = self._agreement.protocol_version
        if capabilities is not None:
            meta[META_CLIENT_CAPABILITIES] = capabilities
        else:
            meta.setdefault(META_CLIENT_CAPABILITIES, self._capabilities)
        if self._info is not None:
            meta.setdefault(META_CLIENT_INFO, self._info)
        if self._log_level is not None:
            meta.setdefault(META_LOG_LEVEL, self._log_level)
        return meta
