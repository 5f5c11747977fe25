"""Our requests and notifications: what each records on the way out, where each answer goes.

A plain request (the app's) takes the session's ``SEND_REQUEST`` (a server's,
``SEND_SERVER_REQUEST`` and its capability check) and gets the 2026-07-28
``_meta``; a handshake step moves the handshake.  An answer goes where its
request's :class:`OutgoingKind` says: the app, the call's engine, or the
handshake.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from .._errors import INVALID_REQUEST, LocalProtocolError, RemoteProtocolError, describe
from .._meta import progress_token_of
from ..wire._inputs import InputRegistry
from ..wire._model import ErrorResponse, Message, Notification, Request, RequestId, ResultResponse
from ._calls import CallTable
from ._client_handshake import ClientHandshake
from ._events import CallEvent, ConnectionEvent, InvalidMessage, RequestCancelled
from ._handshake import Agreement
from ._peer_requests import PeerRequests
from ._requests import MetaStamp, OutgoingKind, OutgoingTable
from ._server_rules import check_server_request
from ._session import Session, SessionInput, SessionState

T = TypeVar("T")


class OurRequests:
    """The requests this end sends: their way out and their answers' way back."""

    __slots__ = (
        "_agreement",
        "_calls",
        "_events",
        "_handshake",
        "_input_kinds",
        "_peer",
        "_routes",
        "_server",
        "_session",
        "_stamp",
        "table",
    )

    def __init__(
        self,
        table: OutgoingTable,
        session: Session,
        agreement: Agreement,
        *,
        calls: CallTable,
        peer: PeerRequests,
        handshake: ClientHandshake | None,
        stamp: MetaStamp,
        events: deque[ConnectionEvent],
        input_kinds: InputRegistry,
    ) -> None:
        self._input_kinds = input_kinds
        self.table = table
        self._session = session
        self._agreement = agreement
        self._calls = calls
        self._peer = peer
        self._handshake = handshake
        self._server = handshake is None
        self._stamp = stamp
        self._events = events  # the connection's queue: SessionOpened goes there
        # A plain request's progress token, by its id: the route is keyed by the token,
        # which the app picks and need not be the id.
        self._routes: dict[RequestId, RequestId] = {}

    # --- Going out -----------------------------------------------------------------------

    def send_request(self, request: Request, emit: Callable[[Message], T]) -> T:
        rid = request.id
        if not isinstance(rid, (str, int)) or isinstance(rid, bool):
            raise LocalProtocolError(f"a request id is a string or an integer, not {describe(rid)}")
        if rid in self.table.requests:
            raise LocalProtocolError(f"request id {describe(rid)} is already in flight")
        if self._handshake is not None and self._handshake.sending(request):
            return emit(request)
        self.table.check_room()
        if self._server:
            check_server_request(request, self._agreement.peer_capabilities, self._input_kinds)
            self._session.local(SessionInput.SEND_SERVER_REQUEST)
            params = dict(request.params) if request.params is not None else None
        else:
            self._session.local(SessionInput.SEND_REQUEST)
            params = self._stamp(request.params, None)
        out = emit(Request(id=rid, method=request.method, params=params))
        self.table.add(rid, OutgoingKind.PLAIN, request.method)
        token = progress_token_of(params)
        if token is not None:
            self._calls.progress_routes[token] = (None, rid)
            self._routes[rid] = token
        return out

    def _forget_route(self, rid: RequestId) -> None:
        token = self._routes.pop(rid, None)
        if token is not None:
            self._calls.progress_routes.pop(token, None)

    def send_notification(self, note: Notification, emit: Callable[[Message], T]) -> T:
        method = note.method
        if self._handshake is not None and method == "notifications/initialized":
            self._events.append(self._handshake.initialized_sent())
            return emit(note)
        params = note.params or {}
        if method == "notifications/cancelled":
            rid: Any = params.get("requestId")
            if not isinstance(rid, (str, int)) or isinstance(rid, bool):
                raise LocalProtocolError(
                    f"notifications/cancelled needs the requestId of a request, got {describe(rid)}"
                )
            # Our own request (a client's; a 2025-era server's to its client), else, for a
            # 2026 server, the end of a subscriptions/listen stream: no answer follows.
            own = not self._server or self._session.state is SessionState.READY
            if own and rid in self.table.requests:
                self.table.abandon(rid)
                self._forget_route(rid)
            else:
                self._peer.end(rid)
        elif (
            self._server
            and method in ("notifications/message", "notifications/progress")
            and self._session.state is not SessionState.READY
        ):
            kind = "LogMessage" if method == "notifications/message" else "Progress"
            raise LocalProtocolError(
                f"send {kind}(request_id=...) so the request's opt-in is honoured"
            )
        return emit(note)

    # --- Coming back ---------------------------------------------------------------------

    def on_response(
        self, response: ResultResponse | ErrorResponse, now: float
    ) -> ConnectionEvent | None:
        """What an answer means; ``None`` when nothing is for the app (a leg's answer
        went to its engine, a late answer was dropped)."""
        rid = response.id
        if rid is None:
            return response  # the peer could not read one of our messages
        outgoing = self.table.requests.pop(rid, None)
        if outgoing is None:
            if self.table.finished.discard(rid):
                return None  # a late answer to a request we abandoned
            return InvalidMessage(
                error=RemoteProtocolError(
                    f"response for unknown request id {describe(rid)}",
                    code=INVALID_REQUEST,
                    request_id=rid,
                )
            )
        if outgoing.kind is OutgoingKind.PLAIN:
            self._forget_route(rid)
            return response
        if outgoing.kind is OutgoingKind.LEG:
            assert outgoing.call is not None
            return self._calls.on_leg_answer(outgoing.call, response, now)
        assert self._handshake is not None  # only a client sends handshake steps
        return self._handshake.on_answer(outgoing.kind, response)

    def on_cancelled(
        self, rid: RequestId, reason: str | None, now: float
    ) -> RequestCancelled | CallEvent | None:
        """Client: the server gave up on one of our requests (in 2026 only
        ``subscriptions/listen``); a call's leg is re-issued."""
        outgoing = self.table.requests.get(rid)
        if self._server or outgoing is None:
            return None  # it raced with the answer: nothing to do
        self.table.abandon(rid)
        if outgoing.kind is OutgoingKind.LEG and outgoing.call is not None:
            self._calls.on_leg_dropped(outgoing.call, now)
            return None
        self._forget_route(rid)
        return RequestCancelled(request_id=rid, reason=reason)

    def unanswered(self) -> tuple[RequestId, ...]:
        """Our requests still waiting, call legs excepted (their calls fail instead)."""
        return tuple(
            rid for rid, out in self.table.requests.items() if out.kind is not OutgoingKind.LEG
        )
