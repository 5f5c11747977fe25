"""Events a :class:`~mrtr_core.Connection` hands out and accepts, besides the wire messages.

The four JSON-RPC messages (:class:`~mrtr_core.Request`, ``Notification``,
``ResultResponse``, ``ErrorResponse``) are events too: what one connection
sends, its peer hands out as the same class.  The classes here cover what is
not a plain message: a call's round-engine events, progress and log messages
tied to a request, cancellation, bad input, the connection's own answers, the
handshake, and the end of the stream.  All are frozen, slotted, keyword-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._errors import MrtrError, RemoteProtocolError
from .._meta import Era
from ..engine._events import EngineEvent
from ..wire._model import ErrorResponse, Notification, Request, RequestId, ResultResponse


@attrs.frozen(kw_only=True)
class CallEvent:
    """An event of the round-engine flow started by ``Connection.call``; ``call`` is its handle.

    ``SendRequest``/``SendRetry`` and ``CancelLeg`` go back to ``send()`` (after
    the retry's ``delay``): the connection assigns each leg a fresh id and stamps
    its ``_meta``.  The rest are for the app, exactly as documented for the engine.
    """

    call: int
    event: EngineEvent


@attrs.frozen(kw_only=True)
class Progress:
    """``notifications/progress`` for a request.

    A server sends it with ``request_id`` set to the request's id; the
    connection finds the request's progress token (nothing is sent when the
    request asked for no progress or was cancelled).  A client hands it out with
    ``request_id`` set to the leg it arrived for and, when that leg belongs to a
    call, ``call`` set: progress follows the logical call across its legs.
    """

    request_id: RequestId
    progress: float
    total: float | None = None
    message: str | None = None
    call: int | None = None


@attrs.frozen(kw_only=True)
class LogMessage:
    """``notifications/message`` for a request (server only).

    Sent only if that request opted in with a ``logLevel`` at or below ``level``
    (2026-07-28), or, on a 2025-era session, always: the app owns
    ``logging/setLevel`` there.  Otherwise ``send()`` returns ``b""``.
    """

    request_id: RequestId
    level: str
    data: Any
    logger: str | None = None


@attrs.frozen(kw_only=True)
class RequestCancelled:
    """The peer cancelled one of the requests it sent us (``notifications/cancelled``).

    After a server hands this out, ``send()`` of anything for ``request_id``
    returns ``b""``: nothing further goes out for that id.
    """

    request_id: RequestId
    reason: str | None = None


@attrs.frozen(kw_only=True)
class InvalidMessage:
    """The peer sent something we could not accept; the connection goes on.

    ``reply`` is the error response to send (``None`` when none is due: a client
    never answers garbage, nobody answers a notification or a response).  Its
    ``id`` is omitted when none could be read.
    """

    error: RemoteProtocolError
    reply: ErrorResponse | None = None


@attrs.frozen(kw_only=True)
class AutoReply:
    """The connection answered a protocol request itself; send ``reply``.

    Server: ``server/discover``, ``initialize`` and ``ping``.  Client (2025 era):
    ``ping``.
    """

    request: Request
    reply: ResultResponse | ErrorResponse


@attrs.frozen(kw_only=True)
class HandshakeStep:
    """Client: send ``message`` to settle the era (``server/discover``, ``initialize``,
    ``notifications/initialized``).  Arm a timeout for a request step and call
    ``handshake_timed_out()`` when it fires."""

    message: Request | Notification


@attrs.frozen(kw_only=True)
class SessionOpened:
    """The era is settled.  Client: after ``server/discover`` or the handshake; server:
    when a 2025-era client's ``notifications/initialized`` arrives."""

    era: Era
    protocol_version: str
    peer_info: Mapping[str, Any] | None
    peer_capabilities: Mapping[str, Any]
    instructions: str | None = None


@attrs.frozen(kw_only=True)
class SessionFailed:
    """Client: no era could be agreed; every call fails and nothing more can be sent."""

    error: MrtrError


@attrs.frozen(kw_only=True)
class ConnectionClosed:
    """The stream ended (``receive_data(b"")``) and everything before it was handed out.

    ``unanswered`` lists the ids of our requests still waiting for an answer;
    calls in flight end with ``Failed`` just before this event.
    """

    unanswered: tuple[RequestId, ...] = ()


ConnectionEvent = (
    Request
    | Notification
    | ResultResponse
    | ErrorResponse
    | CallEvent
    | Progress
    | RequestCancelled
    | InvalidMessage
    | AutoReply
    | HandshakeStep
    | SessionOpened
    | SessionFailed
    | ConnectionClosed
)
#: What ``send()`` accepts.
Sendable = (
    Request
    | Notification
    | ResultResponse
    | ErrorResponse
    | CallEvent
    | Progress
    | LogMessage
    | HandshakeStep
    | AutoReply
    | InvalidMessage
)
