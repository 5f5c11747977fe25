"""The sans-IO connection: a whole MCP conversation over bytes, for a client or a server.

::

    conn.receive_data(data)        # only buffers; b"" means the peer closed
    event = conn.next_event()      # one event, or NEED_DATA
    data = conn.send(event)        # bytes to write (b"" when nothing is due)

Parsing is lazy: ``next_event`` frames and decodes one message and changes
state only when it hands an event out.  Everything the connection wants sent
(its own answers, handshake steps, a call's legs) comes out of ``next_event``
as an event that goes back through ``send``; nothing is written behind the
app's back.  Timeouts are the app's: pass ``now`` where asked and call the
``*_timed_out`` inputs when the app's timers fire.  See ``docs/connection.md``.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    LocalProtocolError,
    MrtrError,
    PeerError,
    RemoteProtocolError,
)
from ..engine._engine import RoundEngine
from ..engine._events import (
    TERMINAL_EVENTS,
    CancelLeg,
    EngineEvent,
    Failed,
    SendRequest,
    SendRetry,
    Wait,
)
from ..engine._state import TERMINAL_STATES as ENGINE_TERMINAL_STATES
from ..protocol._meta import (
    ALL_VERSIONS,
    LEGACY_VERSIONS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    MODERN_ERROR_CODES,
    MODERN_VERSIONS,
    Era,
    RequestInfo,
    choose_version,
    has_modern_meta,
    is_log_level,
    is_retry_leg,
    log_level_allows,
    negotiate_legacy,
    progress_token_of,
    read_modern_request,
)
from ..wire._codec import Codec, JsonName, message_from_json
from ..wire._framing import (
    END_OF_STREAM,
    NEED_DATA,
    FramerSignal,
    LineFramer,
    MessageFramer,
    Oversize,
)
from ..wire._model import (
    ErrorObject,
    ErrorResponse,
    Message,
    Notification,
    Request,
    RequestId,
    ResultResponse,
    error_response,
)
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
    SessionOpened,
)
from ._handshake import (
    FALL_BACK,
    Settled,
    initialize_params,
    read_discover_result,
    read_initialize_result,
)
from ._server_rules import (
    check_server_request,
    discover_result,
    finish_result,
    initialize_result,
)
from ._session import CLIENT_TRANSITIONS, SERVER_TRANSITIONS, Session, SessionInput, SessionState

DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024
DEFAULT_MAX_BUFFER_SIZE = 64 * 1024 * 1024
DEFAULT_MAX_IN_FLIGHT = 1024
DEFAULT_MAX_CALLS = 1024
DEFAULT_MAX_FINISHED_IDS = 4096

NeedData = Literal[FramerSignal.NEED_DATA]


class Role(enum.Enum):
    CLIENT = "client"
    SERVER = "server"


CLIENT = Role.CLIENT
SERVER = Role.SERVER

_OPEN_STATES = frozenset({SessionState.MODERN, SessionState.READY})


def _opened(settled: Settled) -> SessionOpened:
    return SessionOpened(
        era=settled.era,
        protocol_version=settled.protocol_version,
        peer_info=settled.peer_info,
        peer_capabilities=settled.peer_capabilities,
        instructions=settled.instructions,
    )


#: Methods a 2026-07-28 request may not use (the app owns ``logging/setLevel``).
REMOVED_IN_2026 = frozenset({"ping", "initialize"})


class _Outgoing:
    """One of our requests waiting for its answer."""

    __slots__ = ("call", "kind", "method")

    def __init__(self, kind: str, method: str, call: int | None = None) -> None:
        self.kind = kind  # "plain", "leg", "discover", "initialize"
        self.method = method
        self.call = call


class _Incoming:
    """One of the peer's requests we handed out and have not answered."""

    __slots__ = ("cancelled", "info", "kind", "method", "progress_token")

    def __init__(
        self,
        kind: str,
        method: str,
        info: RequestInfo | None = None,
        progress_token: str | int | None = None,
    ) -> None:
        self.kind = kind  # "app", "auto", "initialize"
        self.method = method
        self.info = info
        self.progress_token = progress_token
        self.cancelled = False


class _Call:
    __slots__ = (
        "engine",
        "id",
        "last_send",
        "leg_id",
        "method",
        "pending_send",
        "progress",
        "tokens",
        "version_retried",
    )

    def __init__(
        self,
        call_id: int,
        method: str,
        engine: RoundEngine,
        progress: bool,
    ) -> None:
        self.id = call_id
        self.method = method
        self.engine = engine  # its capabilities are the ones each leg declares
        self.progress = progress
        self.pending_send: SendRequest | SendRetry | None = None
        self.last_send: SendRequest | SendRetry | None = None
        self.leg_id: RequestId | None = None
        self.tokens: list[RequestId] = []
        self.version_retried = False


class _BoundedSet:
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


def _positive(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise LocalProtocolError(f"{name} must be a positive integer, got {value!r}")


class Connection:
    """One MCP conversation, client or server, over newline-delimited bytes or whole messages.

    Options (all keyword-only):

    ``framing``: ``"lines"`` (stdio, TCP) or ``"messages"`` (HTTP bodies, SSE
    data, WebSocket frames).  ``era`` (client): ``"auto"`` probes
    ``server/discover`` and falls back to ``initialize``; ``"modern"`` sends
    2026-07-28 requests at once; ``"legacy"`` starts with ``initialize``.  A
    server serves both eras at once.  ``info``: our ``{name, version}``.
    ``capabilities``: ours (a client's default per-request capabilities).
    ``versions``: the protocol versions we speak, newest first.
    ``instructions`` (server), ``log_level`` (client: opt every request in to
    log messages), ``cache_ttl_ms`` and ``cache_scope`` (server: the defaults
    put on cacheable results that lack them).

    Bounds: ``max_message_size`` (16 MiB), ``max_buffer_size`` (64 MiB, bytes
    buffered and not yet handed out), ``max_outgoing`` and ``max_incoming``
    (1024 requests in flight each way), ``max_calls`` (1024 live calls),
    ``max_finished_ids`` (4096 abandoned request ids remembered, so a late
    answer is dropped quietly instead of reported as bogus).
    """

    def __init__(
        self,
        role: Role,
        *,
        framing: Literal["lines", "messages"] = "lines",
        era: Literal["auto", "modern", "legacy"] = "auto",
        info: Mapping[str, Any] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        versions: Sequence[str] = ALL_VERSIONS,
        instructions: str | None = None,
        log_level: str | None = None,
        cache_ttl_ms: int = 0,
        cache_scope: Literal["public", "private"] = "private",
        json: JsonName | Codec = "auto",
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        max_buffer_size: int = DEFAULT_MAX_BUFFER_SIZE,
        max_outgoing: int = DEFAULT_MAX_IN_FLIGHT,
        max_incoming: int = DEFAULT_MAX_IN_FLIGHT,
        max_calls: int = DEFAULT_MAX_CALLS,
        max_finished_ids: int = DEFAULT_MAX_FINISHED_IDS,
    ) -> None:
        if not isinstance(role, Role):
            raise LocalProtocolError(f"role must be CLIENT or SERVER, got {role!r}")
        if framing == "lines":
            self._framer: LineFramer | MessageFramer = LineFramer(
                max_message_size=max_message_size, max_buffer_size=max_buffer_size
            )
        elif framing == "messages":
            self._framer = MessageFramer(
                max_message_size=max_message_size, max_buffer_size=max_buffer_size
            )
        else:
            raise LocalProtocolError(f"framing must be 'lines' or 'messages', got {framing!r}")
        if era not in ("auto", "modern", "legacy"):
            raise LocalProtocolError(f"era must be 'auto', 'modern' or 'legacy', got {era!r}")
        for name, value in (
            ("max_outgoing", max_outgoing),
            ("max_incoming", max_incoming),
            ("max_calls", max_calls),
            ("max_finished_ids", max_finished_ids),
        ):
            _positive(name, value)
        if log_level is not None and not is_log_level(log_level):
            raise LocalProtocolError(f"unknown log level {log_level!r}")
        if cache_scope not in ("public", "private"):
            raise LocalProtocolError("cache_scope must be 'public' or 'private'")
        if not isinstance(cache_ttl_ms, int) or isinstance(cache_ttl_ms, bool) or cache_ttl_ms < 0:
            raise LocalProtocolError("cache_ttl_ms must be a non-negative integer")
        self._modern_versions = tuple(v for v in versions if v in MODERN_VERSIONS)
        self._legacy_versions = tuple(v for v in versions if v in LEGACY_VERSIONS)
        if len(self._modern_versions) + len(self._legacy_versions) != len(versions) or not versions:
            raise LocalProtocolError(f"versions must be a non-empty subset of {ALL_VERSIONS}")
        self.role = role
        self.framing = framing
        self.info = info
        self.capabilities: Mapping[str, Any] = capabilities if capabilities is not None else {}
        self.instructions = instructions
        self.log_level = log_level
        self.cache_ttl_ms = cache_ttl_ms
        self.cache_scope = cache_scope
        self.max_outgoing = max_outgoing
        self.max_incoming = max_incoming
        self.max_calls = max_calls
        self._codec = json if isinstance(json, Codec) else Codec(json)
        self._now = 0.0
        self._events: deque[ConnectionEvent] = deque()
        self._outgoing: dict[RequestId, _Outgoing] = {}
        self._incoming: dict[RequestId, _Incoming] = {}
        self._finished = _BoundedSet(max_finished_ids)
        # Error replies handed out for requests we refused: their ids may be sent once.
        self._owed_replies = _BoundedSet(max_incoming)
        self._calls: dict[int, _Call] = {}
        self._ready_calls: deque[int] = deque()
        self._progress_routes: dict[RequestId, tuple[int | None, RequestId]] = {}
        self._cancel_targets: dict[tuple[int, int], RequestId] = {}
        self._next_id = 1
        self._next_call = 1
        self._closed: ConnectionClosed | None = None
        #: The era once known (a client's is settled by the handshake).
        self.era: Era | None = None
        #: The protocol version in use (client), or the 2025-era session's (server).
        self.protocol_version: str | None = None
        #: What the peer told us about itself in the handshake or ``server/discover``.
        self.peer_info: Mapping[str, Any] | None = None
        self.peer_capabilities: Mapping[str, Any] = {}
        self._handshake_ids: dict[RequestId, str] = {}
        self._discover_retried = False
        self._settled: Settled | None = None  # a 2025 session's, until initialized is sent
        if role is SERVER:
            self._session = Session(SERVER_TRANSITIONS)
        else:
            self._session = Session(CLIENT_TRANSITIONS)
            self._open_client(era)

    # --- Reading ----------------------------------------------------------------

    @property
    def session_state(self) -> SessionState:
        return self._session.state

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Buffer bytes from the peer (a whole message for ``framing="messages"``).

        ``b""`` means the peer closed: what is buffered is still handed out,
        then ``ConnectionClosed``.  Data after that is a ``LocalProtocolError``.
        """
        if not data:
            self._framer.feed_eof()
        else:
            self._framer.feed(data)

    def next_event(self, now: float | None = None) -> ConnectionEvent | NeedData:
        """The next event, or ``NEED_DATA``.

        ``now`` (seconds, any monotonic origin) is the time round engines see
        when an answer arrives; when omitted, the latest time given is used.
        """
        if now is not None:
            self._now = now
        if self._events:
            return self._events.popleft()
        event = self._next_call_event()
        if event is not None:
            return event
        while True:
            frame = self._framer.next_frame()
            if frame is NEED_DATA:
                return FramerSignal.NEED_DATA
            if frame is END_OF_STREAM:
                return self._on_end_of_stream()
            if isinstance(frame, Oversize):
                return self._invalid(
                    RemoteProtocolError(
                        f"message of at least {frame.size} bytes exceeds "
                        f"max_message_size={self._framer.max_message_size}",
                        code=INVALID_REQUEST,
                    ),
                    replyable=True,
                )
            assert isinstance(frame, bytes)
            result = self._on_frame(frame)
            if result is not None:
                return result

    def response_stream_closed(self, request_id: RequestId) -> None:
        """The transport can no longer answer this request of the peer's (its HTTP
        response stream closed): treat it as cancelled by the peer.

        Queues ``RequestCancelled(request_id, reason="response stream closed")``
        for the app; from then on sends for that id return ``b""``.  A no-op for
        an id that is not waiting for an answer or was cancelled already.
        """
        incoming = self._incoming.get(request_id)
        if incoming is not None and incoming.kind == "app" and not incoming.cancelled:
            incoming.cancelled = True
            self._events.append(
                RequestCancelled(request_id=request_id, reason="response stream closed")
            )

    def request_info(self, request_id: RequestId) -> RequestInfo:
        """Server: era, version, capabilities, log level, ... of a request handed out."""
        incoming = self._incoming.get(request_id)
        if incoming is None or incoming.info is None:
            raise LocalProtocolError(f"no request {request_id!r} is waiting for an answer")
        return incoming.info

    def new_request_id(self) -> int:
        """A request id not in use and not recently abandoned."""
        while self._next_id in self._outgoing or self._next_id in self._finished:
            self._next_id += 1
        rid = self._next_id
        self._next_id += 1
        return rid

    @property
    def outstanding(self) -> tuple[RequestId, ...]:
        """Ids of our requests waiting for an answer."""
        return tuple(self._outgoing)

    # --- Calls (client) ------------------------------------------------------------

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
    ) -> int:
        """Start a multi round-trip flow for ``tools/call``, ``prompts/get`` or
        ``resources/read``; returns its handle (the ``call`` of its ``CallEvent``s).

        Capabilities: ``capabilities``, else the ones in ``params["_meta"]``,
        else the connection's.  ``progress=True`` puts a progress token on every
        leg; progress comes out as ``Progress(call=...)``.  Legs wait until the
        era is settled.
        """
        if self.role is not CLIENT:
            raise LocalProtocolError("only a client connection makes calls")
        if self._session.state in (SessionState.FAILED, SessionState.ERROR) or self._closed:
            raise LocalProtocolError(f"cannot call in session state {self._session.state.value}")
        if len(self._calls) >= self.max_calls:
            raise LocalProtocolError(f"more than max_calls={self.max_calls} calls in flight")
        if now is not None:
            self._now = now
        params = {} if params is None else params
        if capabilities is None:
            meta = params.get("_meta") if isinstance(params, Mapping) else None
            found = meta.get(META_CLIENT_CAPABILITIES) if isinstance(meta, Mapping) else None
            capabilities = found if isinstance(found, Mapping) else self.capabilities
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
        )
        engine.start(self._now)
        call_id = self._next_call
        self._next_call += 1
        self._calls[call_id] = _Call(call_id, method, engine, progress)
        self._ready_calls.append(call_id)
        return call_id

    def provide(self, call: int, key: str, response: Any, now: float | None = None) -> None:
        """The app's answer to a ``DispatchInput`` of ``call``."""
        self._engine_input(call, now).provide(key, response, self._now)

    def fail_input(self, call: int, key: str, reason: str) -> None:
        """The app cannot answer ``key``: the call fails."""
        self._engine_input(call, None).fail(key, reason)

    def input_timed_out(self, call: int, now: float | None = None) -> None:
        self._engine_input(call, now).input_timed_out(self._now)

    def leg_timed_out(self, call: int, now: float | None = None) -> None:
        """The app's timer for the call's leg (``timeout`` of its send event) fired."""
        # The CancelLeg that follows names the leg, so it can still be cancelled on the wire.
        self._engine_input(call, now).leg_timed_out(self._now)

    def leg_broken(self, call: int, now: float | None = None) -> None:
        """The leg's response stream broke before its answer: it is re-issued."""
        c = self._call(call)
        self._abandon_leg(c)
        self._engine_input(call, now).leg_broken(self._now)

    def cancel(self, call: int, now: float | None = None) -> None:
        """Cancel a call (a no-op once it has ended)."""
        if call not in self._calls:
            if 0 < call < self._next_call:
                return
            raise LocalProtocolError(f"no call {call!r}")
        self._engine_input(call, now).cancel(self._now)

    def handshake_timed_out(self) -> None:
        """Client: the app's timer for a ``HandshakeStep`` request fired.

        A ``server/discover`` probe falls back to ``initialize``; a timed-out
        ``initialize`` fails the session.  A no-op when no step is in flight.
        """
        state = self._session.state
        if state not in (SessionState.DISCOVERING, SessionState.INITIALIZING):
            return
        for rid in self._handshake_ids:  # a late answer to the step is dropped
            self._outgoing.pop(rid, None)
            self._finished.add(rid)
        self._handshake_ids.clear()
        if state is SessionState.DISCOVERING:
            self._events.appendleft(self._fall_back())
        else:
            self._session.remote(SessionInput.RECV_LEGACY_SIGNAL)
            self._events.appendleft(
                self._session_failed(RemoteProtocolError("initialize timed out"))
            )

    def _call(self, call: int) -> _Call:
        found = self._calls.get(call)
        if found is None:
            raise LocalProtocolError(f"no call {call!r} in flight")
        return found

    def _engine_input(self, call: int, now: float | None) -> RoundEngine:
        found = self._call(call)
        if now is not None:
            self._now = now
        self._ready_calls.append(call)
        return found.engine

    def _abandon_leg(self, call: _Call) -> None:
        if call.leg_id is not None:
            self._outgoing.pop(call.leg_id, None)
            self._finished.add(call.leg_id)
            call.leg_id = None

    def _next_call_event(self) -> ConnectionEvent | None:
        if self.role is CLIENT and self._session.state not in _OPEN_STATES:
            return None  # legs wait for the era
        ready = self._ready_calls
        while ready:
            call = self._calls.get(ready[0])
            if call is None:
                ready.popleft()
                continue
            event = call.engine.next_event()
            if isinstance(event, Wait):
                ready.popleft()
                continue
            if call.engine.state in ENGINE_TERMINAL_STATES and isinstance(
                event, (SendRequest, SendRetry)
            ):
                continue  # cancelled (or ended) before this leg came out: it never goes
            return self._hand_out(call, event)
        return None

    def _hand_out(self, call: _Call, event: EngineEvent) -> CallEvent:
        if isinstance(event, (SendRequest, SendRetry)):
            # (A re-issued leg's broken predecessor was abandoned by leg_broken.)
            call.pending_send = call.last_send = event
        elif isinstance(event, CancelLeg):
            call.pending_send = None  # a retry still waiting out its delay is simply not sent
            if call.leg_id is not None:
                self._cancel_targets[(call.id, event.leg)] = call.leg_id
                while len(self._cancel_targets) > self._finished.limit:
                    del self._cancel_targets[next(iter(self._cancel_targets))]
                self._abandon_leg(call)
        elif isinstance(event, TERMINAL_EVENTS):
            self._end_call(call)
        return CallEvent(call=call.id, event=event)

    def _end_call(self, call: _Call) -> None:
        self._abandon_leg(call)
        for token in call.tokens:
            self._progress_routes.pop(token, None)
        del self._calls[call.id]

    # --- Sending --------------------------------------------------------------------

    def send(self, event: Sendable) -> bytes:
        """The bytes for ``event`` (``b""`` when nothing is due on the wire)."""
        if isinstance(event, CallEvent):
            return self._send_call_event(event)
        # The events that carry a message to send are accepted as they come.
        if isinstance(event, HandshakeStep):
            return self.send(event.message)
        if isinstance(event, AutoReply):
            return self.send(event.reply)
        if isinstance(event, InvalidMessage):
            return b"" if event.reply is None else self.send(event.reply)
        if isinstance(event, (ResultResponse, ErrorResponse)):
            return self._send_response(event)
        if isinstance(event, Request):
            return self._send_request(event)
        if isinstance(event, Notification):
            return self._send_notification(event)
        if isinstance(event, Progress):
            return self._send_progress(event)
        if isinstance(event, LogMessage):
            return self._send_log(event)
        raise LocalProtocolError(f"cannot send {type(event).__name__}")

    def _wire(self, message: Message) -> bytes:
        data = self._codec.encode(message)
        return data + b"\n" if self.framing == "lines" else data

    def _stamp(
        self,
        params: Mapping[str, Any] | None,
        capabilities: Mapping[str, Any] | None,
        *,
        modern: bool = False,
    ) -> dict[str, Any]:
        """A copy of ``params`` with the 2026-07-28 ``_meta`` every request carries
        (nothing added on a 2025-era session).  ``_meta`` is copied, never changed."""
        out = dict(params) if params is not None else {}
        if self.era != "modern" and not modern:
            return out
        given = out.get("_meta")
        meta = dict(given) if isinstance(given, Mapping) else {}
        meta[META_PROTOCOL_VERSION] = self.protocol_version
        if capabilities is not None:
            meta[META_CLIENT_CAPABILITIES] = capabilities
        else:
            meta.setdefault(META_CLIENT_CAPABILITIES, self.capabilities)
        if self.info is not None:
            meta.setdefault(META_CLIENT_INFO, self.info)
        if self.log_level is not None:
            meta.setdefault(META_LOG_LEVEL, self.log_level)
        out["_meta"] = meta
        return out

    def _check_outgoing_room(self) -> None:
        if len(self._outgoing) >= self.max_outgoing:
            raise LocalProtocolError(
                f"more than max_outgoing={self.max_outgoing} requests in flight"
            )

    def _send_call_event(self, event: CallEvent) -> bytes:
        inner = event.event
        if isinstance(inner, CancelLeg):
            rid = self._cancel_targets.pop((event.call, inner.leg), None)
            if rid is None or self.framing == "messages":
                return b""  # nothing on the wire, or HTTP: close the leg's stream instead
            return self._wire(
                Notification(method="notifications/cancelled", params={"requestId": rid})
            )
        if not isinstance(inner, (SendRequest, SendRetry)):
            raise LocalProtocolError(f"{type(inner).__name__} is for the app, not for send()")
        call = self._calls.get(event.call)
        if call is None and 0 < event.call < self._next_call:
            return b""  # the call ended (cancelled) while this leg waited: it never goes
        if call is None or call.pending_send is not inner:
            raise LocalProtocolError("this leg is not the one the call is waiting to send")
        if self._session.state not in _OPEN_STATES:
            raise LocalProtocolError("the session is not open")
        self._check_outgoing_room()
        rid = self.new_request_id()
        params = self._stamp(inner.params, call.engine.capabilities)
        if call.progress:
            meta = params.get("_meta")
            meta = dict(meta) if isinstance(meta, Mapping) else {}
            meta["progressToken"] = rid
            params["_meta"] = meta
            self._progress_routes[rid] = (call.id, rid)
            call.tokens.append(rid)
        data = self._wire(Request(id=rid, method=call.method, params=params))
        self._outgoing[rid] = _Outgoing("leg", call.method, call.id)
        call.leg_id = rid
        call.pending_send = None
        return data

    def _send_request(self, request: Request) -> bytes:
        rid = request.id
        if rid in self._outgoing:
            raise LocalProtocolError(f"request id {rid!r} is already in flight")
        step = self._handshake_ids.get(rid)
        if step is not None:
            self._session.local(
                SessionInput.SEND_DISCOVER if step == "discover" else SessionInput.SEND_INITIALIZE
            )
            self._outgoing[rid] = _Outgoing(step, request.method)
            return self._wire(request)
        self._check_outgoing_room()
        if self.role is SERVER:
            check_server_request(request, self.peer_capabilities)
            self._session.local(SessionInput.SEND_SERVER_REQUEST)
            params = dict(request.params) if request.params is not None else None
        else:
            self._session.local(SessionInput.SEND_REQUEST)
            params = self._stamp(request.params, None)
        data = self._wire(Request(id=rid, method=request.method, params=params))
        self._outgoing[rid] = _Outgoing("plain", request.method)
        token = progress_token_of(params)
        if token is not None:
            self._progress_routes[token] = (None, rid)
        return data

    def _send_notification(self, note: Notification) -> bytes:
        method = note.method
        if self.role is CLIENT and method == "notifications/initialized":
            self._session.local(SessionInput.SEND_INITIALIZED)
            assert self._settled is not None  # the table only allows this after the result
            self._events.append(_opened(self._settled))
            return self._wire(note)
        params = note.params or {}
        if method == "notifications/cancelled":
            rid: Any = params.get("requestId")
            # Our own request (a client's; a 2025-era server's to its client), else, for a
            # 2026 server, the end of a subscriptions/listen stream: no answer follows.
            own = self.role is CLIENT or self._session.state is SessionState.READY
            incoming = self._incoming.get(rid) if self.role is SERVER else None
            if own and rid in self._outgoing:
                del self._outgoing[rid]
                self._finished.add(rid)
            elif incoming is not None and incoming.info and incoming.info.era == "modern":
                # (Ids of 2025-era requests share the number space of our own requests.)
                del self._incoming[rid]
        elif (
            self.role is SERVER
            and method in ("notifications/message", "notifications/progress")
            and self._session.state is not SessionState.READY
        ):
            kind = "LogMessage" if method == "notifications/message" else "Progress"
            raise LocalProtocolError(
                f"send {kind}(request_id=...) so the request's opt-in is honoured"
            )
        return self._wire(note)

    def _send_response(self, response: ResultResponse | ErrorResponse) -> bytes:
        rid = response.id
        if rid is None:
            return self._wire(response)
        incoming = self._incoming.get(rid)
        if incoming is None:
            if self._owed_replies.discard(rid) and isinstance(response, ErrorResponse):
                return self._wire(response)
            raise LocalProtocolError(f"no request {rid!r} is waiting for an answer")
        if incoming.cancelled:
            del self._incoming[rid]
            return b""  # cancelled by the peer: nothing further goes out for this id
        if isinstance(response, ResultResponse) and incoming.kind == "app" and incoming.info:
            response = ResultResponse(id=rid, result=self._finish(incoming.info, response.result))
        if incoming.kind == "initialize":
            self._session.local(
                SessionInput.SEND_INITIALIZE_RESULT
                if isinstance(response, ResultResponse)
                else SessionInput.SEND_INITIALIZE_ERROR
            )
        data = self._wire(response)
        del self._incoming[rid]
        return data

    def _finish(self, info: RequestInfo, result: Mapping[str, Any]) -> dict[str, Any]:
        return finish_result(
            info,
            result,
            server_info=self.info,
            cache_ttl_ms=self.cache_ttl_ms,
            cache_scope=self.cache_scope,
        )

    def _send_progress(self, progress: Progress) -> bytes:
        incoming = self._incoming.get(progress.request_id)
        if incoming is None or incoming.cancelled or incoming.progress_token is None:
            return b""
        params: dict[str, Any] = {
            "progressToken": incoming.progress_token,
            "progress": progress.progress,
        }
        if progress.total is not None:
            params["total"] = progress.total
        if progress.message is not None:
            params["message"] = progress.message
        return self._wire(Notification(method="notifications/progress", params=params))

    def _send_log(self, log: LogMessage) -> bytes:
        if self.role is not SERVER:
            raise LocalProtocolError("only a server sends log messages")
        if not is_log_level(log.level):
            raise LocalProtocolError(f"unknown log level {log.level!r}")
        incoming = self._incoming.get(log.request_id)
        if incoming is None or incoming.cancelled or incoming.info is None:
            return b""
        info = incoming.info
        if info.era == "modern" and not log_level_allows(info.log_level, log.level):
            return b""
        params: dict[str, Any] = {"level": log.level, "data": log.data}
        if log.logger is not None:
            params["logger"] = log.logger
        return self._wire(Notification(method="notifications/message", params=params))

    # --- Receiving ------------------------------------------------------------------

    def _on_frame(self, frame: bytes) -> ConnectionEvent | None:
        try:
            obj = self._codec.loads(frame)
        except RemoteProtocolError as exc:
            return self._invalid(exc, replyable=True)
        try:
            message = message_from_json(obj)
        except RemoteProtocolError as exc:
            # Answer only what may have been a request: never a response or a notification.
            looks_like_request = (
                not isinstance(obj, dict)
                or ("method" in obj and "id" in obj)
                or ("result" not in obj and "error" not in obj and "method" not in obj)
            )
            return self._invalid(exc, replyable=looks_like_request)
        if isinstance(message, Request):
            return self._on_request(message)
        if isinstance(message, Notification):
            return self._on_notification(message)
        return self._on_response(message)

    def _invalid(self, error: RemoteProtocolError, *, replyable: bool) -> InvalidMessage:
        """Report bad input; a server also gets the error response to send."""
        if self.role is CLIENT or not replyable:
            return InvalidMessage(error=error, reply=None)
        rid = error.request_id
        if rid is not None and (rid in self._incoming or rid in self._owed_replies):
            rid = None  # never answer under an id the peer is still waiting on
        if rid is not None:
            self._owed_replies.add(rid)
        return InvalidMessage(error=error, reply=error_response(rid, error))

    def _refuse(
        self, request: Request, message: str, code: int, data: Any = None
    ) -> InvalidMessage:
        error = RemoteProtocolError(message, code=code, data=data, request_id=request.id)
        return self._invalid(error, replyable=True)

    def _on_request(self, request: Request) -> ConnectionEvent | None:
        rid = request.id
        if rid in self._incoming or rid in self._owed_replies:
            return InvalidMessage(
                error=RemoteProtocolError(
                    f"request id {rid!r} is already in use by a request we have not answered",
                    code=INVALID_REQUEST,
                    request_id=rid,
                ),
                reply=None,
            )
        if len(self._incoming) >= self.max_incoming:
            return self._refuse(
                request,
                f"more than max_incoming={self.max_incoming} requests in flight",
                INTERNAL_ERROR,
            )
        if self.role is CLIENT:
            return self._on_server_request(request)
        method = request.method
        if method in REMOVED_IN_2026 and has_modern_meta(request.params) and self._modern_versions:
            return self._refuse(request, f"{method} was removed in 2026-07-28", METHOD_NOT_FOUND)
        if method == "ping":
            return self._auto_reply(request, {})
        if method == "initialize":
            return self._on_initialize(request)
        params = request.params
        if not self._modern_versions and method == "server/discover":
            # A 2025-only server looks like one: dual-era clients fall back on -32601.
            return self._refuse(request, "server/discover is a 2026-07-28 method", METHOD_NOT_FOUND)
        if has_modern_meta(params) and self._modern_versions:
            assert params is not None
            try:
                info = read_modern_request(rid, method, params, self._modern_versions)
            except RemoteProtocolError as exc:
                return self._invalid(exc, replyable=True)
            if method == "server/discover":
                self._incoming[rid] = _Incoming("auto", method, info)
                found = discover_result(self._modern_versions, self.capabilities, self.instructions)
                result = self._finish(info, found)
                return AutoReply(request=request, reply=ResultResponse(id=rid, result=result))
            self._incoming[rid] = _Incoming("app", method, info, info.progress_token)
            return request
        if not self._session.remote(SessionInput.RECV_LEGACY_REQUEST):
            return self._refuse(
                request,
                f"missing _meta {META_PROTOCOL_VERSION}: a 2026-07-28 request must carry "
                "protocolVersion and clientCapabilities in _meta, and a 2025-era client "
                "must complete initialize first",
                INVALID_PARAMS,
                {"supported": list(self._modern_versions)} if self._modern_versions else None,
            )
        info = RequestInfo(
            id=rid,
            method=method,
            era="legacy",
            protocol_version=self.protocol_version or "",
            capabilities=self.peer_capabilities,
            client_info=self.peer_info,
            log_level=None,
            progress_token=progress_token_of(params),
            retry=is_retry_leg(params),
        )
        self._incoming[rid] = _Incoming("app", method, info, info.progress_token)
        return request

    def _auto_reply(self, request: Request, result: dict[str, Any]) -> AutoReply:
        self._incoming[request.id] = _Incoming("auto", request.method)
        return AutoReply(request=request, reply=ResultResponse(id=request.id, result=result))

    def _on_initialize(self, request: Request) -> ConnectionEvent:
        params = request.params or {}
        if not self._legacy_versions:
            return self._refuse(
                request, "this server only speaks 2026-07-28: use server/discover", METHOD_NOT_FOUND
            )
        requested = params.get("protocolVersion")
        capabilities = params.get("capabilities")
        client_info = params.get("clientInfo")
        if (
            not isinstance(requested, str)
            or not isinstance(capabilities, Mapping)
            or not isinstance(client_info, Mapping)
        ):
            return self._refuse(
                request,
                "initialize needs protocolVersion (string), capabilities and clientInfo (objects)",
                INVALID_PARAMS,
            )
        if not self._session.remote(SessionInput.RECV_INITIALIZE):
            return self._refuse(
                request,
                f"initialize is not accepted in session state {self._session.state.value}",
                INVALID_REQUEST,
            )
        version = negotiate_legacy(requested, self._legacy_versions)
        self.era = "legacy"
        self.protocol_version = version
        self.peer_capabilities = capabilities
        self.peer_info = client_info
        result = initialize_result(version, self.capabilities, self.info, self.instructions)
        self._incoming[request.id] = _Incoming("initialize", "initialize")
        return AutoReply(request=request, reply=ResultResponse(id=request.id, result=result))

    def _on_server_request(self, request: Request) -> ConnectionEvent:
        if not self._session.remote(SessionInput.RECV_SERVER_REQUEST):
            return InvalidMessage(
                error=RemoteProtocolError(
                    f"a server sent a {request.method!r} request outside a 2025-era session",
                    code=INVALID_REQUEST,
                    request_id=request.id,
                ),
                reply=None,
            )
        if request.method == "ping":
            return self._auto_reply(request, {})
        self._incoming[request.id] = _Incoming(
            "app", request.method, None, progress_token_of(request.params)
        )
        return request

    def _on_notification(self, note: Notification) -> ConnectionEvent | None:
        method = note.method
        params = note.params or {}
        if method == "notifications/cancelled":
            return self._on_cancelled(note, params)
        if method == "notifications/progress" and self.role is CLIENT:
            return self._on_progress(note, params)
        if method == "notifications/initialized" and self.role is SERVER:
            before = self._session.state
            if not self._session.remote(SessionInput.RECV_INITIALIZED):
                return InvalidMessage(
                    error=RemoteProtocolError(
                        "notifications/initialized before initialize was answered",
                        code=INVALID_REQUEST,
                    )
                )
            if before is SessionState.READY:
                return None  # a duplicate
            return SessionOpened(
                era="legacy",
                protocol_version=self.protocol_version or "",
                peer_info=self.peer_info,
                peer_capabilities=self.peer_capabilities,
            )
        return note

    def _on_cancelled(
        self, note: Notification, params: Mapping[str, Any]
    ) -> ConnectionEvent | None:
        rid = params.get("requestId")
        reason = params.get("reason")
        if not isinstance(rid, (str, int)) or isinstance(rid, bool):
            return InvalidMessage(
                error=RemoteProtocolError(
                    "notifications/cancelled needs a requestId", code=INVALID_PARAMS
                )
            )
        reason = reason if isinstance(reason, str) else None
        incoming = self._incoming.get(rid)
        if incoming is not None and incoming.kind == "app" and not incoming.cancelled:
            incoming.cancelled = True
            return RequestCancelled(request_id=rid, reason=reason)
        outgoing = self._outgoing.get(rid)
        if self.role is CLIENT and outgoing is not None:
            # The server gave up on one of our requests (in 2026 only subscriptions/listen).
            del self._outgoing[rid]
            self._finished.add(rid)
            if outgoing.kind == "leg" and outgoing.call is not None:
                call = self._calls[outgoing.call]
                call.leg_id = None
                self._engine_input(call.id, None).leg_broken(self._now)
                return self._next_call_event()
            return RequestCancelled(request_id=rid, reason=reason)
        return None  # it raced with the answer: nothing to do

    def _on_progress(self, note: Notification, params: Mapping[str, Any]) -> ConnectionEvent | None:
        token = params.get("progressToken")
        value = params.get("progress")
        total = params.get("total")
        message = params.get("message")
        if (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or (
                total is not None
                and (not isinstance(total, (int, float)) or isinstance(total, bool))
            )
            or (message is not None and not isinstance(message, str))
        ):
            return InvalidMessage(
                error=RemoteProtocolError(
                    "notifications/progress needs a numeric progress", code=INVALID_PARAMS
                )
            )
        route = self._progress_routes.get(token) if isinstance(token, (str, int)) else None
        if route is None:
            return None  # late progress for a request that has ended
        call, rid = route
        return Progress(request_id=rid, progress=value, total=total, message=message, call=call)

    def _on_response(self, response: ResultResponse | ErrorResponse) -> ConnectionEvent | None:
        rid = response.id
        if rid is None:
            return response  # the peer could not read one of our messages
        outgoing = self._outgoing.pop(rid, None)
        if outgoing is None:
            if self._finished.discard(rid):
                return None  # a late answer to a request we abandoned
            return InvalidMessage(
                error=RemoteProtocolError(
                    f"response for unknown request id {rid!r}",
                    code=INVALID_REQUEST,
                    request_id=rid,
                )
            )
        if outgoing.kind == "plain":
            self._progress_routes.pop(rid, None)
            return response
        if outgoing.kind == "leg":
            assert outgoing.call is not None
            return self._on_leg_response(self._calls[outgoing.call], response)
        self._handshake_ids.pop(rid, None)
        if outgoing.kind == "discover":
            return self._on_discover_response(response)
        return self._on_initialize_response(response)

    def _on_leg_response(
        self, call: _Call, response: ResultResponse | ErrorResponse
    ) -> ConnectionEvent | None:
        call.leg_id = None
        if isinstance(response, ErrorResponse):
            error = response.error
            retry_with = self._version_to_retry(error)
            if retry_with is not None and not call.version_retried and call.last_send:
                # -32022: once per call, the same leg again with a version the server named.
                call.version_retried = True
                self.protocol_version = retry_with
                call.pending_send = call.last_send
                return CallEvent(call=call.id, event=call.last_send)
            call.engine.receive_error(error, self._now)
        else:
            call.engine.receive_result(response.result, self._now)
        self._ready_calls.appendleft(call.id)
        return self._next_call_event()

    def _version_to_retry(self, error: ErrorObject) -> str | None:
        if error.code != UNSUPPORTED_PROTOCOL_VERSION or not isinstance(error.data, Mapping):
            return None
        # Even the version we sent: a server may reject a request for another reason
        # first (the conformance suite's request-metadata scenario does); each call and
        # the probe retry only once, so this cannot loop.
        return choose_version(error.data.get("supported"), self._modern_versions)

    # --- The client's era and handshake ------------------------------------------------

    def _open_client(self, era: str) -> None:
        if era == "modern":
            if not self._modern_versions:
                raise LocalProtocolError("era='modern' needs a 2026-07-28 version in versions")
            self._session.state = SessionState.MODERN
            self.era = "modern"
            self.protocol_version = self._modern_versions[0]
        elif era == "auto" and self._modern_versions:
            self._events.append(self._discover_step())
        else:
            if not self._legacy_versions:
                raise LocalProtocolError("era='legacy' needs a 2025-era version in versions")
            self._events.append(self._initialize_step())

    def _discover_step(self) -> HandshakeStep:
        rid = self.new_request_id()
        self._handshake_ids[rid] = "discover"
        if self.protocol_version is None:
            self.protocol_version = self._modern_versions[0]
        params = self._stamp(None, None, modern=True)
        return HandshakeStep(message=Request(id=rid, method="server/discover", params=params))

    def _initialize_step(self) -> HandshakeStep:
        rid = self.new_request_id()
        self._handshake_ids[rid] = "initialize"
        params = initialize_params(self._legacy_versions[0], self.capabilities, self.info)
        return HandshakeStep(message=Request(id=rid, method="initialize", params=params))

    def _on_discover_response(self, response: ResultResponse | ErrorResponse) -> ConnectionEvent:
        if isinstance(response, ErrorResponse):
            error = response.error
            if error.code not in MODERN_ERROR_CODES:
                return self._fall_back()
            version = self._version_to_retry(error)
            if version is not None and not self._discover_retried:
                self._discover_retried = True
                self._session.remote(SessionInput.RECV_VERSION_ERROR)
                self.protocol_version = version
                return self._discover_step()
            self._session.remote(SessionInput.RECV_MODERN_ERROR)
            return self._session_failed(PeerError(error.code, error.message, error.data))
        outcome = read_discover_result(
            response.result, self._modern_versions, self._legacy_versions
        )
        if outcome == FALL_BACK:
            return self._fall_back()
        if isinstance(outcome, MrtrError):
            self._session.remote(SessionInput.RECV_MODERN_ERROR)
            return self._session_failed(outcome)
        assert isinstance(outcome, Settled)
        self._session.remote(SessionInput.RECV_DISCOVER_RESULT)
        self._settle(outcome)
        return _opened(outcome)

    def _fall_back(self) -> HandshakeStep | SessionFailed:
        self._session.remote(SessionInput.RECV_LEGACY_SIGNAL)
        if not self._legacy_versions:
            self._session.state = SessionState.FAILED
            return self._session_failed(
                RemoteProtocolError("the server does not speak 2026-07-28 and legacy is disabled")
            )
        return self._initialize_step()

    def _on_initialize_response(self, response: ResultResponse | ErrorResponse) -> ConnectionEvent:
        if isinstance(response, ErrorResponse):
            error = response.error
            self._session.remote(SessionInput.RECV_INITIALIZE_ERROR)
            return self._session_failed(PeerError(error.code, error.message, error.data))
        outcome = read_initialize_result(response.result, self._legacy_versions)
        if isinstance(outcome, MrtrError):
            self._session.remote(SessionInput.RECV_INITIALIZE_ERROR)
            return self._session_failed(outcome)
        self._session.remote(SessionInput.RECV_INITIALIZE_RESULT)
        self._settle(outcome)
        return HandshakeStep(message=Notification(method="notifications/initialized"))

    def _settle(self, settled: Settled) -> None:
        self._settled = settled
        self.era = settled.era
        self.protocol_version = settled.protocol_version
        self.peer_info = settled.peer_info
        self.peer_capabilities = settled.peer_capabilities

    def _session_failed(self, error: MrtrError) -> SessionFailed:
        self._fail_calls(error)
        return SessionFailed(error=error)

    def _fail_calls(self, error: MrtrError) -> None:
        for call in list(self._calls.values()):
            engine = call.engine
            event: EngineEvent = Failed(error=error)
            if engine.state in ENGINE_TERMINAL_STATES:
                # It ended (a cancel) before its end was handed out: that end stands.
                while not isinstance(queued := engine.next_event(), Wait):
                    event = queued
            else:
                engine.cancel(self._now)  # its own events are moot
            self._end_call(call)
            self._events.append(CallEvent(call=call.id, event=event))

    def _on_end_of_stream(self) -> ConnectionEvent:
        if self._closed is not None:
            return self._closed
        self._session.remote(SessionInput.CLOSE)
        self._fail_calls(RemoteProtocolError("the connection closed before the call finished"))
        unanswered = tuple(rid for rid, out in self._outgoing.items() if out.kind != "leg")
        self._closed = ConnectionClosed(unanswered=unanswered)
        self._events.append(self._closed)
        return self._events.popleft()
