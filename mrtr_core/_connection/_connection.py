"""The sans-IO connection: a whole MCP conversation over bytes, for a client or a server.

::

    conn.receive_data(data)        # only buffers; b"" means the peer closed
    event = conn.next_event()      # one event, or NEED_DATA
    data = conn.send(event)        # bytes to write (b"" when nothing is due)

Adapters that hold parsed messages already use ``receive_message(value)`` and
``send_message(event)`` instead, and nothing is parsed or encoded twice.

Parsing is lazy: ``next_event`` frames and decodes one message and changes
state only when it hands an event out.  Everything the connection wants sent
(its own answers, handshake steps, a call's legs) comes out of ``next_event``
as an event that goes back through ``send``; nothing is written behind the
app's back.  Timeouts are the app's: pass ``now`` where asked and call the
``*_timed_out`` inputs when the app's timers fire.  See ``docs/connection.md``.

This class is the shell over the parts that hold the state: the
:class:`Inbox` (framing and decoding, in arrival order), the
:class:`ClientHandshake` (the era), the :class:`CallTable` (the client's calls),
:class:`PeerRequests` (the peer's requests) and :class:`OurRequests` (ours).  It
hands each message read to the part that owns it and encodes what they send.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from .._errors import (
    INVALID_PARAMS,
    LocalProtocolError,
    MrtrError,
    RemoteProtocolError,
    describe,
)
from .._meta import (
    ALL_VERSIONS,
    Era,
    RequestInfo,
    declared_capabilities,
)
from .._wait import NEED_DATA, Wait
from ..engine._engine import DEFAULT_URL_WAIT, RoundEngine
from ..wire._codec import Codec, JsonName, writes_compact
from ..wire._framing import END_OF_STREAM
from ..wire._inputs import INPUT_KINDS, InputRegistry
from ..wire._model import (
    ErrorObject,
    ErrorResponse,
    Message,
    Notification,
    Request,
    RequestId,
    ResultResponse,
)
from ._calls import CallTable, LegWriter
from ._client_handshake import ClientHandshake
from ._events import (
    AutoReply,
    CallEvent,
    ConnectionClosed,
    ConnectionEvent,
    HandshakeStep,
    InvalidMessage,
    LogMessage,
    Progress,
    RequestCancelled,
    Sendable,
    SessionFailed,
)
from ._handshake import Agreement
from ._inbox import Inbox, Unreadable
from ._options import CLIENT as CLIENT
from ._options import DEFAULT_MAX_BUFFER_SIZE as DEFAULT_MAX_BUFFER_SIZE
from ._options import DEFAULT_MAX_CALLS as DEFAULT_MAX_CALLS
from ._options import DEFAULT_MAX_FINISHED_IDS as DEFAULT_MAX_FINISHED_IDS
from ._options import DEFAULT_MAX_IN_FLIGHT as DEFAULT_MAX_IN_FLIGHT
from ._options import DEFAULT_MAX_MESSAGE_SIZE as DEFAULT_MAX_MESSAGE_SIZE
from ._options import SERVER as SERVER
from ._options import Role as Role
from ._options import check_input_kinds, check_options, codec_for, make_framer, split_versions
from ._our_requests import OurRequests
from ._peer_requests import PeerRequests
from ._requests import MetaStamp, OutgoingTable
from ._session import CLIENT_TRANSITIONS, SERVER_TRANSITIONS, Session, SessionInput, SessionState

NeedData = Literal[Wait.NEED_DATA]
T = TypeVar("T")


_OPEN_STATES = frozenset({SessionState.MODERN, SessionState.READY})


def _as_is(message: Message) -> Message:
    return message


class Connection:
    """One MCP conversation, client or server, over newline-delimited bytes or whole messages.

    Options (all keyword-only):

    ``framing``: ``"lines"`` (stdio, TCP) or ``"messages"`` (HTTP bodies, SSE
    data, WebSocket frames).  ``cancellation`` (client): how a call's cancelled
    leg is cancelled on the wire: ``"notify"`` sends ``notifications/cancelled``;
    ``"close_stream"`` sends nothing, for Streamable HTTP, where closing the
    leg's response stream is the cancellation.  ``era`` (client): ``"auto"``
    probes ``server/discover`` and falls back to ``initialize``; ``"modern"``
    sends 2026-07-28 requests at once; ``"legacy"`` starts with ``initialize``.
    A server serves both eras at once.  ``info``: our ``{name, version}``.
    ``capabilities``: ours (a client's default per-request capabilities).
    ``versions``: the protocol versions we speak, newest first.
    ``instructions`` (server), ``log_level`` (client: opt every request in to
    log messages), ``cache_ttl_ms`` and ``cache_scope`` (server: the defaults
    put on cacheable results that lack them).  ``input_kinds``: the input-kind
    registry (``mrtr_core.wire.INPUT_KINDS``, or one with more kinds) that
    calls read rounds with and a server checks the app's asks against.

    ``json``: the JSON backend (``"auto"``, ``"stdlib"``, ``"orjson"``) or a
    :class:`~mrtr_core.wire.Codec`.

    Bounds: ``max_message_size`` (16 MiB), ``max_buffer_size`` (64 MiB, bytes
    buffered and not yet handed out), ``max_depth`` (128 levels of objects and
    arrays in a message, the envelope included; deeper is refused as a parse
    error, -32700; ``None``: the given codec's, else 128), ``max_outgoing`` and ``max_incoming``
    (1024 requests in flight each way), ``max_calls`` (1024 live calls),
    ``max_finished_ids`` (4096 abandoned request ids remembered, so a late
    answer is dropped quietly instead of reported as bogus).
    """

    def __init__(
        self,
        role: Role,
        *,
        framing: Literal["lines", "messages"] = "lines",
        cancellation: Literal["notify", "close_stream"] = "notify",
        era: Literal["auto", "modern", "legacy"] = "auto",
        info: Mapping[str, Any] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        versions: Sequence[str] = ALL_VERSIONS,
        instructions: str | None = None,
        log_level: str | None = None,
        cache_ttl_ms: int = 0,
        cache_scope: Literal["public", "private"] = "private",
        json: JsonName | Codec = "auto",
        max_depth: int | None = None,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        max_buffer_size: int = DEFAULT_MAX_BUFFER_SIZE,
        max_outgoing: int = DEFAULT_MAX_IN_FLIGHT,
        max_incoming: int = DEFAULT_MAX_IN_FLIGHT,
        max_calls: int = DEFAULT_MAX_CALLS,
        max_finished_ids: int = DEFAULT_MAX_FINISHED_IDS,
        input_kinds: InputRegistry = INPUT_KINDS,
    ) -> None:
        framer = make_framer(
            role, framing, max_message_size=max_message_size, max_buffer_size=max_buffer_size
        )
        check_options(
            cancellation=cancellation,
            era=era,
            log_level=log_level,
            cache_ttl_ms=cache_ttl_ms,
            cache_scope=cache_scope,
            counts={
                "max_outgoing": max_outgoing,
                "max_incoming": max_incoming,
                "max_calls": max_calls,
                "max_finished_ids": max_finished_ids,
            },
        )
        modern, legacy = split_versions(versions)
        check_input_kinds(input_kinds)
        #: The input kinds this end knows: its calls' engines read rounds with them, and a
        #: server checks the app's results and 2025-era requests against them.
        self.input_kinds = input_kinds
        self.role = role
        self.framing = framing
        self.cancellation = cancellation
        self.info = info
        self.capabilities: Mapping[str, Any] = capabilities if capabilities is not None else {}
        self.instructions = instructions
        self.log_level = log_level
        self.cache_ttl_ms = cache_ttl_ms
        self.cache_scope = cache_scope
        self.max_outgoing = max_outgoing
        self.max_incoming = max_incoming
        self.max_calls = max_calls
        self._codec = codec_for(json, max_depth)
        self._inbox = Inbox(framer, self._codec)
        # send() writes a call's legs through it: what every leg repeats, encoded once.
        self._leg_writer = (
            LegWriter(self._codec, b"\n" if framing == "lines" else b"")
            if writes_compact(self._codec.backend)
            else None
        )
        self._now = 0.0
        self._events: deque[ConnectionEvent] = deque()
        self._closed: ConnectionClosed | None = None
        self._session = Session(SERVER_TRANSITIONS if role is SERVER else CLIENT_TRANSITIONS)
        self._agreement = Agreement()
        self._stamp = MetaStamp(self._agreement, self.capabilities, info, log_level)
        self._outgoing = OutgoingTable(max_outgoing, max_finished_ids)
        self._calls = CallTable(self._outgoing, self._agreement, modern, max_calls)
        self._peer = PeerRequests(
            self._session,
            self._agreement,
            server=role is SERVER,
            modern_versions=modern,
            legacy_versions=legacy,
            capabilities=self.capabilities,
            info=info,
            instructions=instructions,
            cache_ttl_ms=cache_ttl_ms,
            cache_scope=cache_scope,
            max_incoming=max_incoming,
            input_kinds=input_kinds,
        )
        self._handshake: ClientHandshake | None = None
        if role is CLIENT:
            self._handshake = ClientHandshake(
                self._session,
                self._outgoing,
                self._agreement,
                modern_versions=modern,
                legacy_versions=legacy,
                capabilities=self.capabilities,
                info=info,
                stamp=lambda params: self._stamp(params, None, modern=True),
            )
            step = self._handshake.start(era)
            if step is not None:
                self._events.append(step)
        self._ours = OurRequests(
            self._outgoing,
            self._session,
            self._agreement,
            calls=self._calls,
            peer=self._peer,
            handshake=self._handshake,
            stamp=self._stamp,
            events=self._events,
            input_kinds=input_kinds,
        )

    # --- What is settled ----------------------------------------------------------------

    @property
    def session_state(self) -> SessionState:
        return self._session.state

    @property
    def era(self) -> Era | None:
        """The era once known (a client's is settled by the handshake)."""
        return self._agreement.era

    @property
    def protocol_version(self) -> str | None:
        """The protocol version in use (client), or the 2025-era session's (server)."""
        return self._agreement.protocol_version

    @property
    def peer_info(self) -> Mapping[str, Any] | None:
        """What the peer told us about itself in the handshake or ``server/discover``."""
        return self._agreement.peer_info

    @property
    def peer_capabilities(self) -> Mapping[str, Any]:
        return self._agreement.peer_capabilities

    # --- Reading ----------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Buffer bytes from the peer (a whole message for ``framing="messages"``).

        ``b""`` means the peer closed: what is buffered is still handed out,
        then ``ConnectionClosed``.  Data after that is a ``LocalProtocolError``.
        """
        self._inbox.receive_data(data)

    def receive_message(self, value: Any) -> None:
        """Queue one message the transport already decoded (what ``json.loads`` gave).

        Nothing is checked here: ``next_event`` reads it exactly as it reads a
        message from ``receive_data``, refusals included.  It is handed out after
        every complete message received before it; it does not count against
        ``max_message_size`` or ``max_buffer_size``.  After ``receive_data(b"")``
        it is a ``LocalProtocolError``.
        """
        self._inbox.receive_message(value)

    def next_event(self, now: float | None = None) -> ConnectionEvent | NeedData:
        """The next event, or ``NEED_DATA``.

        ``now`` (seconds, any monotonic origin) is the time round engines see
        when an answer arrives; when omitted, the latest time given is used.
        """
        if now is not None:
            self._now = now
        if self._events:
            return self._events.popleft()
        while True:
            # A call's events first: an answer to a leg makes its call ready.
            if self._calls.ready:
                event = self._call_event()
                if event is not None:
                    return event
            message = self._inbox.next_message()
            if type(message) is ResultResponse:  # (the usual message: an answer to a leg)
                result = self._ours.on_response(message, self._now)
                if result is None:
                    continue
                if isinstance(result, SessionFailed):
                    self._fail_calls(result.error)
                return result
            if message is NEED_DATA:
                return NEED_DATA
            if message is END_OF_STREAM:
                return self._on_end_of_stream()
            if isinstance(message, Unreadable):
                if message.answer_to not in self._ours.table.requests:
                    return self._peer.invalid(message.error, replyable=message.replyable)
                message = _unreadable_answer(message)  # it ends what it answers
            if isinstance(message, Request):
                return self._peer.on_request(message)
            if isinstance(message, Notification):
                result = self._on_notification(message)
            else:
                result = self._ours.on_response(message, self._now)
                if isinstance(result, SessionFailed):
                    self._fail_calls(result.error)
            if result is not None:
                return result

    def response_stream_closed(self, request_id: RequestId) -> None:
        """The transport can no longer answer this request of the peer's (its HTTP
        response stream closed): treat it as cancelled by the peer.

        Queues ``RequestCancelled(request_id, reason="response stream closed")``
        for the app; from then on sends for that id return ``b""``.  A no-op for
        an id that is not waiting for an answer or was cancelled already.
        """
        if self._peer.cancelled_by_peer(request_id):
            self._events.append(
                RequestCancelled(request_id=request_id, reason="response stream closed")
            )

    def request_info(self, request_id: RequestId) -> RequestInfo:
        """Server: era, version, capabilities, log level, ... of a request handed out."""
        return self._peer.info(request_id)

    def new_request_id(self) -> int:
        """A request id not in use and not recently abandoned."""
        return self._outgoing.new_id()

    @property
    def outstanding(self) -> tuple[RequestId, ...]:
        """Ids of our requests waiting for an answer."""
        return tuple(self._outgoing.requests)

    # --- Calls (client) ------------------------------------------------------------------

    def call(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        now: float | None = None,
        progress: bool = False,
        capabilities: Mapping[str, Any] | None = None,
        leg_timeout: float | None = None,
        total_timeout: float | None = None,
        input_timeout: float | None = None,
        max_rounds: int = 10,
        max_state_only_legs: int = 10,
        max_leg_reissues: int = 3,
        url_wait_timeout: float | None = DEFAULT_URL_WAIT,
    ) -> int:
        """Start a multi round-trip flow for ``tools/call``, ``prompts/get`` or
        ``resources/read``; returns its handle (the ``call`` of each ``CallEvent`` of the flow).

        Capabilities: ``capabilities``, else the ones in ``params["_meta"]``,
        else the connection's.  ``progress=True`` puts a progress token on every
        leg; progress comes out as ``Progress(call=...)``.  Legs wait until the
        era is settled.  ``url_wait_timeout`` bounds the wait for a person after an
        accepted URL elicitation (see ``RoundEngine``).
        """
        if self.role is not CLIENT:
            raise LocalProtocolError("only a client connection makes calls")
        if self._session.state in (SessionState.FAILED, SessionState.ERROR) or self._closed:
            raise LocalProtocolError(f"cannot call in session state {self._session.state.value}")
        self._calls.check_room()
        self._tick(now)
        params = {} if params is None else params
        if capabilities is None:
            declared = declared_capabilities(params)
            capabilities = self.capabilities if declared is None else declared
        engine = RoundEngine(
            method,
            params,
            capabilities=capabilities,
            leg_timeout=leg_timeout,
            total_timeout=total_timeout,
            input_timeout=input_timeout,
            max_rounds=max_rounds,
            max_state_only_legs=max_state_only_legs,
            max_leg_reissues=max_leg_reissues,
            url_wait_timeout=url_wait_timeout,
            input_kinds=self.input_kinds,
        )
        engine.start(self._now)
        return self._calls.start(method, engine, progress)

    def provide(self, call: int, key: str, response: Any, now: float | None = None) -> None:
        """The app's answer to a ``DispatchInput`` of ``call``."""
        engine = self._calls.engine_input(call)
        if now is not None:
            self._now = now
        engine.provide(key, response, self._now)

    def fail_input(self, call: int, key: str, reason: str) -> None:
        """The app cannot answer ``key``: the call fails."""
        self._calls.engine_input(call).fail(key, reason)

    def input_timed_out(self, call: int, now: float | None = None) -> None:
        engine = self._calls.engine_input(call)
        self._tick(now)
        engine.input_timed_out(self._now)

    def leg_timed_out(self, call: int, now: float | None = None) -> None:
        """The app's timer for the call's leg (``timeout`` of its send event) fired."""
        # The CancelLeg that follows names the leg, so it can still be cancelled on the wire.
        engine = self._calls.engine_input(call)
        self._tick(now)
        engine.leg_timed_out(self._now)

    def leg_broken(self, call: int, now: float | None = None) -> None:
        """The response stream of the call's leg on the wire broke before its answer: the
        leg is re-issued (a new ``SendRequest``/``SendRetry`` with ``reissue=True``).

        A ``LocalProtocolError``, with nothing changed, when no leg of the call is on
        the wire: not sent yet, answered, cancelled, or the call waits for input.
        """
        engine = self._calls.break_leg(call)
        self._tick(now)
        engine.leg_broken(self._now)

    def cancel(self, call: int, now: float | None = None) -> None:
        """Cancel a call (a no-op once it has ended)."""
        if self._calls.live(call) is None:
            if self._calls.ever_started(call):
                return
            raise LocalProtocolError(f"no call {describe(call)}")
        engine = self._calls.engine_input(call)
        self._tick(now)
        engine.cancel(self._now)

    def handshake_timed_out(self) -> None:
        """Client: the app's timer for a ``HandshakeStep`` request fired.

        A ``server/discover`` probe falls back to ``initialize``; a timed-out
        ``initialize`` fails the session.  A no-op when no step is in flight.
        """
        event = self._handshake.timed_out() if self._handshake is not None else None
        if event is None:
            return
        if isinstance(event, SessionFailed):
            self._fail_calls(event.error)
        self._events.appendleft(event)

    # --- Sending ----------------------------------------------------------------------

    def send(self, event: Sendable) -> bytes:
        """The bytes for ``event`` (``b""`` when nothing is due on the wire)."""
        data = self._send(event, self._encode, self._leg_writer)
        return b"" if data is None else data

    def send_message(self, event: Sendable) -> Message | None:
        """The message ``send(event)`` would encode (ids, ``_meta`` and the server's
        additions in place), or ``None`` when nothing is due on the wire.  It records
        exactly what ``send`` records; the transport encodes and frames it."""
        return self._send(event, _as_is)

    def encode(self, message: Message) -> bytes:
        """``message`` as this connection writes it: encoded, and framed as a line for
        ``framing="lines"``.  ``send(event)`` is ``encode(send_message(event))``; an
        adapter that wants the message too (to trace it, to build HTTP headers from it)
        calls the two itself, so nothing it sends is decoded again."""
        return self._encode(message)

    def _encode(self, message: Message) -> bytes:
        data = self._codec.encode(message)
        return data + b"\n" if self.framing == "lines" else data

    def _send(
        self, event: Sendable, emit: Callable[[Message], T], writer: LegWriter | None = None
    ) -> T | None:
        # ``emit`` encodes (send) or passes the message through (send_message), so both
        # record exactly the same.  An answer is released, and a plain request or a leg
        # recorded, only once ``emit`` returned: what the app's values make unencodable
        # is not taken as sent.
        if isinstance(event, CallEvent):
            return self._calls.send(
                event,
                emit,
                self._stamp,
                # A 2025 session cancels with a notification on every transport (on
                # 2025 HTTP a closed stream is not a cancellation).
                notify_cancel=self.cancellation == "notify" or self.era == "legacy",
                session_open=self._session.state in _OPEN_STATES,
                writer=writer,
            )
        # The events that carry a message to send are accepted as they come.
        if isinstance(event, HandshakeStep):
            return self._send(event.message, emit)
        if isinstance(event, AutoReply):
            return self._send(event.reply, emit)
        if isinstance(event, InvalidMessage):
            return None if event.reply is None else self._send(event.reply, emit)
        if isinstance(event, (ResultResponse, ErrorResponse)):
            return self._peer.answer(event, emit)
        if isinstance(event, Request):
            return self._ours.send_request(event, emit)
        if isinstance(event, Notification):
            return self._ours.send_notification(event, emit)
        if isinstance(event, Progress):
            note = self._peer.progress(event)
            return None if note is None else emit(note)
        if isinstance(event, LogMessage):
            note = self._peer.log(event)
            return None if note is None else emit(note)
        raise LocalProtocolError(f"cannot send {type(event).__name__}")

    # --- Receiving --------------------------------------------------------------------

    def _tick(self, now: float | None) -> None:
        if now is not None:
            self._now = now

    def _call_event(self) -> CallEvent | None:
        if self.role is CLIENT and self._session.state not in _OPEN_STATES:
            return None  # legs wait for the era
        return self._calls.next_event()

    def _on_notification(self, note: Notification) -> ConnectionEvent | None:
        method = note.method
        params = note.params or {}
        if method == "notifications/cancelled":
            return self._on_cancelled(params)
        if method == "notifications/progress" and self.role is CLIENT:
            return self._calls.on_progress(params)
        if method == "notifications/initialized" and self.role is SERVER:
            return self._peer.on_initialized()
        return note

    def _on_cancelled(self, params: Mapping[str, Any]) -> ConnectionEvent | None:
        rid = params.get("requestId")
        reason = params.get("reason")
        if not isinstance(rid, (str, int)) or isinstance(rid, bool):
            return InvalidMessage(
                error=RemoteProtocolError(
                    "notifications/cancelled needs a requestId", code=INVALID_PARAMS
                )
            )
        reason = reason if isinstance(reason, str) else None
        if self._peer.cancelled_by_peer(rid):
            return RequestCancelled(request_id=rid, reason=reason)
        return self._ours.on_cancelled(rid, reason, self._now)

    def _fail_calls(self, error: MrtrError) -> None:
        self._events.extend(self._calls.fail_all(error, self._now))

    def _on_end_of_stream(self) -> ConnectionEvent:
        if self._closed is not None:
            return self._closed
        self._session.remote(SessionInput.CLOSE)
        self._fail_calls(RemoteProtocolError("the connection closed before the call finished"))
        self._closed = ConnectionClosed(unanswered=self._ours.unanswered())
        self._events.append(self._closed)
        return self._events.popleft()


def _unreadable_answer(unreadable: Unreadable) -> ErrorResponse:
    """An answer to one of our requests that could not be read (too deep, a result
    that is not an object, ...), as the error that ends that request: waiting on
    would wait for an answer that has already come."""
    error = unreadable.error
    assert unreadable.answer_to is not None
    return ErrorResponse(
        id=unreadable.answer_to,
        error=ErrorObject(code=error.code, message=f"unreadable answer: {error.message}"),
    )
