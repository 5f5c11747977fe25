"""The client: one logical MCP client over one link (a stdio child, an HTTP endpoint).

The model
---------
A :class:`Client` owns one client ``mrtr_core.Connection`` and a *link* that
moves its bytes (``stdio_client.StdioLink``, ``http_client.HttpLink``).  All
protocol logic is the connection's; the client only connects it to trio:

* **One synchronous pump.**  After every input to the connection (bytes from
  the link, an answer, a timer) the client drains ``next_event`` and acts on
  each event at once: a leg or handshake step goes to ``link.transmit``, an
  answer wakes whoever waits, an input request starts a task.  The pump never
  awaits, so events go out in the order the connection made them and a
  cancelled caller can still cancel its call on the wire.
* **Calls** (``tools/call``, ``prompts/get``, ``resources/read``) run the
  connection's round engine: each :meth:`Client.call` has a nursery for its
  timers (leg, input, whole flow: trio's clock, fed back as ``now=`` and the
  ``*_timed_out`` inputs), its delayed retries (state-only pacing) and one task
  per input request, which awaits the app's :class:`InputHandler` and feeds
  ``provide`` (or ``fail_input`` when the handler raises
  :class:`~mrtr_transports.errors.InputUnavailable`).
* **A 2025-era session** hands out the server's own requests
  (``elicitation/create``, ``sampling/createMessage``, ``roots/list``): they
  are answered through the same ``InputHandler`` (the key is the method).
* **Links** call back into the client: :meth:`Client.receive_data` with
  what arrived, :meth:`Client.link_lost` when the link died (every live call
  then fails with that :class:`~mrtr_transports.errors.TransportError`), and
  for per-request streams (HTTP) :meth:`Client.response_ended` /
  :meth:`Client.response_failed`.

Bounds: calls in flight are bounded by the connection's ``max_calls`` and
``max_outgoing``; per call, one task per input key of the current round (the
server's round size) and at most two timers; the trace id table keeps the
last 4096 ids; ``list_tools`` follows at most 100 pages.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Literal, Protocol, TypedDict, Unpack

import trio

import mrtr_core as m

from .errors import (
    CallError,
    CallTimeout,
    ClientError,
    InputUnavailable,
    RoundCapExceeded,
    TransportError,
)

logger = logging.getLogger("mrtr.client")

#: What a client with an input handler but no ``capabilities=`` declares.
DEFAULT_CAPABILITIES: Mapping[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}
#: Seconds a handshake request (``server/discover``, ``initialize``) may take.
DEFAULT_HANDSHAKE_TIMEOUT = 10.0
#: Request ids remembered for tracing (which flow and round a response belongs to).
MAX_TRACE_IDS = 4096
#: Pages of ``tools/list`` followed before giving up.
MAX_TOOL_PAGES = 100

_TERMINAL = (m.Done, m.Failed, m.TimedOut, m.Cancelled)
_ANSWER_CLASS: dict[type, type] = {
    m.ElicitFormRequest: m.ElicitResult,
    m.ElicitUrlRequest: m.ElicitResult,
    m.CreateMessageRequest: m.CreateMessageResult,
    m.ListRootsRequest: m.ListRootsResult,
}
_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


def _our_info() -> dict[str, str]:
    try:
        version = metadata.version("mrtr")
    except metadata.PackageNotFoundError:  # running from a source tree
        version = "0"
    return {"name": "mrtr", "version": version}


class InputHandler(Protocol):
    """Answers one input request of a call (or a 2025-era server's request).

    ``key`` is the server's key for the request (in a 2025 session: the
    request's method).  Return the answer (``ElicitResult``,
    ``CreateMessageResult``, ``ListRootsResult``, or the same as a plain
    mapping); a declined or cancelled elicitation is an answer.  Raise
    :class:`~mrtr_transports.errors.InputUnavailable` when no answer can be
    given: the call then fails with it.  Handlers for the keys of one round run
    concurrently; a handler whose answer is no longer wanted is cancelled.
    """

    async def __call__(
        self, key: str, request: m.InputRequest
    ) -> m.InputResponse | Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One JSON-RPC message sent or received.

    ``flow`` is the call's handle (``None`` for handshake steps and plain
    requests).  ``round`` is the round a leg belongs to: 0 for the first leg,
    then the round whose answers (or ``requestState``) a retry carries; a
    received result has its leg's round, except an ``input_required`` one, which
    has the number of the round it opens (so it pairs with the retry that
    answers it).  ``t`` is ``trio.current_time()``.
    """

    dir: Literal["send", "recv"]
    t: float
    flow: int | None
    round: int | None
    msg: dict[str, Any]


Tracer = Callable[[TraceRecord], None]


@dataclass(slots=True)
class Outbound:
    """One message the client hands to its link.

    ``kind``: ``"leg"`` (a call's request), ``"plain"`` (a plain request),
    ``"handshake"``, ``"notification"`` or ``"response"`` (to a 2025 server's
    request).  ``message`` is the decoded message when the link asked for it
    (``Link.needs_messages``) or a tracer is set.
    """

    data: bytes
    kind: Literal["leg", "plain", "handshake", "notification", "response"]
    method: str | None = None
    request_id: m.RequestId | None = None
    call: int | None = None
    round: int | None = None
    message: dict[str, Any] | None = None


class Link(Protocol):
    """What moves a client connection's bytes.  A link never raises from ``transmit``:
    it reports failures through the client's callbacks."""

    #: ``"lines"`` for a byte stream, ``"messages"`` when every message is framed for us.
    framing: Literal["lines", "messages"]
    #: True when ``transmit`` needs ``Outbound.message`` (HTTP builds headers from it).
    needs_messages: bool
    #: True when tool calls need the tool list first (HTTP mirrors ``x-mcp-header``).
    wants_tool_list: bool

    async def start(self, client: Client, nursery: trio.Nursery) -> None:
        """Connect or spawn; raise ``TransportError`` when that fails."""

    def transmit(self, out: Outbound) -> None:
        """Put one message on the wire without blocking."""

    def close_stream(self, request_id: m.RequestId) -> None:
        """Stop reading the answer to ``request_id`` (HTTP: close its stream)."""

    def tools_listed(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The tools to keep from a ``tools/list`` (HTTP drops invalid ``x-mcp-header``)."""
        ...

    async def aclose(self) -> None:
        """Shut the link down (bounded in time)."""


class _Waiter:
    """A plain request waiting for its answer."""

    __slots__ = ("error", "event", "method", "response")

    def __init__(self, method: str) -> None:
        self.method = method
        self.event = trio.Event()
        self.response: m.ResultResponse | m.ErrorResponse | None = None
        self.error: ClientError | None = None

    def settle(
        self,
        response: m.ResultResponse | m.ErrorResponse | None = None,
        error: ClientError | None = None,
    ) -> None:
        if not self.event.is_set():
            self.response, self.error = response, error
            self.event.set()


class _Flow:
    """The client's side of one call: its timers, input tasks and outcome."""

    __slots__ = (
        "call",
        "cause",
        "finished",
        "input_timeout",
        "input_timer",
        "inputs",
        "inputs_open",
        "leg_id",
        "leg_out",
        "leg_timer",
        "lost",
        "nursery",
        "on_progress",
        "outcome",
        "override",
        "pending",
        "round",
        "started",
        "total_budget",
        "total_started",
    )

    def __init__(
        self,
        nursery: trio.Nursery,
        started: float,
        on_progress: Callable[[m.Progress], None] | None,
        input_timeout: float | None,
    ) -> None:
        self.call = 0
        self.nursery = nursery
        self.started = started
        self.on_progress = on_progress
        self.input_timeout = input_timeout
        self.outcome: m.EngineEvent | None = None
        self.lost: TransportError | None = None  # the link's failure, if it had failed by then
        # Why a Cancelled outcome happened when we cancelled on the caller's behalf.
        self.override: ClientError | None = None
        self.cause: BaseException | None = None  # an input handler's own exception
        self.finished = trio.Event()
        self.round = 0
        self.leg_id: m.RequestId | None = None
        self.leg_out = False
        self.leg_timer: trio.CancelScope | None = None
        self.input_timer: trio.CancelScope | None = None
        self.inputs: dict[str, trio.CancelScope] = {}
        self.pending: set[str] = set()
        self.inputs_open = False
        # The caller's whole-flow budget and when it started (before any tools/list).
        self.total_budget: float | None = None
        self.total_started = started


def _answer_problem(request: m.InputRequest, answer: Any) -> str | None:
    """Why ``answer`` cannot go to the server as the answer to ``request`` (None: it can)."""
    expected = _ANSWER_CLASS[type(request)]
    if isinstance(answer, Mapping):
        try:
            m.structure(answer, expected)
        except m.MrtrError as exc:
            return f"the input handler's answer is not a valid {expected.__name__}: {exc}"
        return None
    if not isinstance(answer, expected):
        return (
            f"the input handler must answer {request.method} with a {expected.__name__}, "
            f"got {type(answer).__name__}"
        )
    return None


def _decode(data: bytes | bytearray) -> dict[str, Any]:
    try:
        value = m.default_codec.loads(data)
    except m.MrtrError:
        return {"unreadable": data[:200].decode("utf-8", "replace")}
    return value if isinstance(value, dict) else {"unreadable": repr(value)[:200]}


class Client:
    """One logical MCP client over one link.  Made by ``open_stdio_client``,
    ``open_http_client`` or :func:`open_client`; see the module docstring."""

    def __init__(
        self,
        link: Link,
        nursery: trio.Nursery,
        *,
        answer: InputHandler | None = None,
        capabilities: Mapping[str, Any] | None = None,
        era: Literal["auto", "modern", "legacy"] = "auto",
        info: Mapping[str, Any] | None = None,
        tracer: Tracer | None = None,
        handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
        log_level: str | None = None,
        on_notification: Callable[[m.Notification], None] | None = None,
        max_message_size: int = m.DEFAULT_MAX_MESSAGE_SIZE,
        max_calls: int = m.DEFAULT_MAX_CALLS,
        max_outgoing: int = m.DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        if capabilities is None:
            capabilities = DEFAULT_CAPABILITIES if answer is not None else {}
        self.link = link
        self._nursery = nursery
        self._answer = answer
        self._capabilities = capabilities
        self._tracer = tracer
        self._on_notification = on_notification
        self._handshake_timeout = handshake_timeout
        self._conn = m.Connection(
            m.CLIENT,
            framing=link.framing,
            cancellation="close_stream" if link.framing == "messages" else "notify",
            era=era,
            info=info if info is not None else _our_info(),
            capabilities=capabilities,
            log_level=log_level,
            max_message_size=max_message_size,
            max_buffer_size=max(4 * max_message_size, m.DEFAULT_MAX_BUFFER_SIZE),
            max_calls=max_calls,
            max_outgoing=max_outgoing,
        )
        self._flows: dict[int, _Flow] = {}
        self._waiters: dict[m.RequestId, _Waiter] = {}
        self._opened = trio.Event()
        if era == "modern":
            self._opened.set()
        self._session_error: m.MrtrError | None = None
        self._instructions: str | None = None
        self._lost: TransportError | None = None
        self._eof_fed = False
        self._closed = False
        self._closing = False
        self._pumping = False
        self._handshake_timer: trio.CancelScope | None = None
        self._tools_listed = False
        self._trace_ids: OrderedDict[m.RequestId, tuple[int | None, int | None]] = OrderedDict()
        self._trace_framer = (
            m.LineFramer(max_message_size=max_message_size, max_buffer_size=4 * max_message_size)
            if tracer is not None and link.framing == "lines"
            else None
        )

    # --- What the session settled ---------------------------------------------------

    @property
    def era(self) -> str | None:
        """``"modern"`` (2026-07-28) or ``"legacy"`` (a 2025 session)."""
        return self._conn.era

    @property
    def protocol_version(self) -> str | None:
        return self._conn.protocol_version

    @property
    def peer_info(self) -> Mapping[str, Any] | None:
        """The server's ``serverInfo`` (``None`` with ``era="modern"``: there was no probe)."""
        return self._conn.peer_info

    @property
    def peer_capabilities(self) -> Mapping[str, Any]:
        return self._conn.peer_capabilities

    @property
    def instructions(self) -> str | None:
        return self._instructions

    # --- Calls -------------------------------------------------------------------------

    async def call(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        leg_timeout: float | None = None,
        input_timeout: float | None = None,
        max_rounds: int = 10,
        on_progress: Callable[[m.Progress], None] | None = None,
        capabilities: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Run a multi round-trip call (``tools/call``, ``prompts/get``,
        ``resources/read``) to its end and return the complete result.

        ``timeout`` is the whole-flow budget, ``leg_timeout`` the server's time
        per leg, ``input_timeout`` the time per round for the answers.  Raises
        ``CallError``, ``CallTimeout``, ``RoundCapExceeded``,
        ``TransportError`` or ``InputUnavailable``.  ``capabilities`` replaces
        the client's for this call.
        """
        started = trio.current_time()
        if method == "tools/call" and self.link.wants_tool_list and not self._tools_listed:
            await self._list_tools_quietly()
        try:
            return await self._call_once(
                method, params, started, timeout, leg_timeout, input_timeout, max_rounds,
                on_progress, capabilities,
            )  # fmt: skip
        except CallError as exc:
            # HTTP: the server's tool schema changed under us; list again and retry once.
            if not (
                exc.code == m.HEADER_MISMATCH
                and method == "tools/call"
                and self.link.wants_tool_list
            ):
                raise
            logger.info("header mismatch on tools/call: listing tools again and retrying once")
            await self._list_tools_quietly()
            return await self._call_once(
                method, params, started, timeout, leg_timeout, input_timeout, max_rounds,
                on_progress, capabilities,
            )  # fmt: skip

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, **call_options: Any
    ) -> dict[str, Any]:
        """``tools/call`` of ``name`` with ``arguments``; options as for :meth:`call`."""
        params = {"name": name, "arguments": dict(arguments or {})}
        return await self.call("tools/call", params, **call_options)

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool of ``tools/list`` (all pages).  Over HTTP the tools whose
        ``x-mcp-header`` annotations are invalid are dropped (with a warning) and
        the rest are kept for mirroring arguments into ``Mcp-Param-*`` headers."""
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            result = await self.request("tools/list", {"cursor": cursor} if cursor else None)
            page = result.get("tools")
            if not isinstance(page, list):
                raise CallError(m.INVALID_PARAMS, "the tools/list result has no 'tools' list")
            tools.extend(dict(tool) for tool in page if isinstance(tool, Mapping))
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
        kept = self.link.tools_listed(tools)
        self._tools_listed = True
        return kept

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """A plain request (no rounds): its result, or ``CallError``/``CallTimeout``/
        ``TransportError``."""
        await self._wait_open()
        conn = self._conn
        request_id = conn.new_request_id()
        waiter = _Waiter(method)
        self._waiters[request_id] = waiter
        started = trio.current_time()
        try:
            try:
                data = conn.send(
                    m.Request(
                        id=request_id,
                        method=method,
                        params=dict(params) if params is not None else None,
                    )
                )
            except m.LocalProtocolError as exc:
                raise ClientError(f"cannot send {method}: {exc}") from exc
            self._send_out(Outbound(data, "plain", method=method, request_id=request_id))
            with trio.move_on_after(math.inf if timeout is None else timeout):
                await waiter.event.wait()
        finally:
            self._waiters.pop(request_id, None)
            if not waiter.event.is_set():
                self._abandon(request_id)
        if waiter.error is not None:
            raise waiter.error
        response = waiter.response
        if response is None:
            raise CallTimeout(trio.current_time() - started, timeout, "total")
        if isinstance(response, m.ErrorResponse):
            error = response.error
            raise CallError(error.code, error.message, error.data)
        return dict(response.result)

    async def aclose(self) -> None:
        """Fail what is still running with ``TransportError(kind="closed")`` and shut
        the link down (a stdio child: close stdin, wait, SIGTERM, wait, SIGKILL)."""
        if self._closing:
            return
        self._closing = True
        self.link_lost(TransportError("the client was closed", kind="closed"))
        with trio.CancelScope(shield=True):
            await self.link.aclose()
        self._nursery.cancel_scope.cancel()

    # --- Callbacks for links ---------------------------------------------------------

    def receive_data(self, data: bytes | bytearray) -> None:
        """Bytes from the link (with ``framing="messages"``: exactly one message)."""
        if self._eof_fed or not data:
            return
        if self._tracer is not None:
            self._trace_received(data)
        try:
            self._conn.receive_data(data)
        except m.LocalProtocolError as exc:  # the buffer bound: cannot happen while we pump
            self.link_lost(TransportError(f"cannot buffer what the server sent: {exc}"))
            return
        self._pump()

    def link_lost(self, error: TransportError) -> None:
        """The link is gone: every live call and request fails with ``error``."""
        if self._lost is None:
            self._lost = error
        if not self._eof_fed:
            self._eof_fed = True
            self._conn.receive_data(b"")
            self._pump()

    def is_waiting_for(self, request_id: m.RequestId) -> bool:
        """Whether the answer to ``request_id`` has still not arrived (nor was abandoned)."""
        return request_id in self._conn.outstanding

    def response_ended(self, out: Outbound) -> None:
        """Per-request streams (HTTP): the response to ``out`` was read to its end."""
        if out.request_id is None or not self.is_waiting_for(out.request_id):
            return
        self._stream_broke(
            out,
            TransportError(
                f"the response to {out.method} ended without its answer", kind="disconnect"
            ),
        )

    def response_failed(self, out: Outbound, error: TransportError, *, broken: bool) -> None:
        """Per-request streams (HTTP): no answer to ``out`` will come.  ``broken``: the
        stream broke after the request went out (a leg is then re-issued)."""
        if out.request_id is None or not self.is_waiting_for(out.request_id):
            return
        if broken:
            self._stream_broke(out, error)
        elif out.kind == "leg":
            self._fail_flow(out, error)
        elif out.kind == "plain":
            self._fail_plain(out.request_id, error)
        elif out.method == "server/discover" and error.kind == "http":
            # A 400/404/405 without a recognised modern error: the dual-era fallback signal.
            self._conn.handshake_timed_out()
            self._pump()
        else:
            self.link_lost(error)

    # --- The pump --------------------------------------------------------------------

    def _pump(self) -> None:
        if self._pumping:
            return  # the running loop drains whatever was just queued
        self._pumping = True
        try:
            conn = self._conn
            now = trio.current_time()
            while True:
                event = conn.next_event(now)
                if isinstance(event, m.FramerSignal):  # NEED_DATA
                    break
                if isinstance(event, m.ConnectionClosed):
                    if not self._closed:  # (handed out for ever once the stream ended)
                        self._dispatch(event)
                    break
                self._dispatch(event)
        finally:
            self._pumping = False

    def _dispatch(self, event: m.ConnectionEvent) -> None:
        if isinstance(event, m.CallEvent):
            self._on_call_event(event)
        elif isinstance(event, m.Progress):
            flow = self._flows.get(event.call) if event.call is not None else None
            if flow is not None and flow.on_progress is not None:
                try:
                    flow.on_progress(event)
                except Exception:
                    logger.exception("the on_progress callback failed")
        elif isinstance(event, (m.ResultResponse, m.ErrorResponse)):
            waiter = self._waiters.get(event.id) if event.id is not None else None
            if waiter is not None:
                waiter.settle(response=event)
            elif isinstance(event, m.ErrorResponse):
                logger.warning("the server could not read a message: %s", event.error.message)
        elif isinstance(event, m.HandshakeStep):
            self._on_handshake_step(event)
        elif isinstance(event, m.SessionOpened):
            self._instructions = event.instructions
            self._end_handshake()
        elif isinstance(event, m.SessionFailed):
            self._session_error = event.error
            self._end_handshake()
        elif isinstance(event, m.Request):  # a 2025-era server asks us something
            self._start_server_request(event)
        elif isinstance(event, m.AutoReply):  # a 2025-era ping
            self._send_response(event.reply)
        elif isinstance(event, m.Notification):
            self._on_notification_event(event)
        elif isinstance(event, m.RequestCancelled):
            waiter = self._waiters.get(event.request_id)
            if waiter is not None:
                waiter.settle(error=CallError(m.INTERNAL_ERROR, "the server cancelled the request"))
        elif isinstance(event, m.InvalidMessage):
            logger.warning("ignored a bad message from the server: %s", event.error)
        elif isinstance(event, m.ConnectionClosed):
            self._closed = True
            self._end_handshake()
            for waiter in list(self._waiters.values()):
                waiter.settle(error=self._lost_error())

    def _send_out(self, out: Outbound) -> None:
        if not out.data:
            return
        if out.message is None and (self._tracer is not None or self.link.needs_messages):
            out.message = _decode(out.data)
            found = out.message.get("id")
            if out.request_id is None and isinstance(found, (str, int)):
                out.request_id = found
            if out.method is None and isinstance(out.message.get("method"), str):
                out.method = out.message["method"]
        if self._tracer is not None:
            assert out.message is not None
            if out.request_id is not None:
                self._remember_trace_id(out.request_id, out.call, out.round)
            self._trace("send", out.call, out.round, out.message)
        self.link.transmit(out)

    def _send_response(self, response: m.ResultResponse | m.ErrorResponse) -> None:
        try:
            data = self._conn.send(response)
        except m.LocalProtocolError as exc:
            logger.warning("could not answer the server's request: %s", exc)
            return
        self._send_out(Outbound(data, "response", request_id=None))

    def _lost_error(self) -> TransportError:
        if self._lost is not None:
            return self._lost.copy()
        return TransportError("the server closed the connection", kind="disconnect")

    def _abandon(self, request_id: m.RequestId) -> None:
        """Give up on a plain request: cancel it on the wire (stdio) or close its stream."""
        if self._eof_fed or not self.is_waiting_for(request_id):
            return
        note = m.Notification(method="notifications/cancelled", params={"requestId": request_id})
        try:
            data = self._conn.send(note)  # also forgets the id, so a late answer is dropped
        except m.LocalProtocolError:
            return
        if self.link.framing == "lines":
            self._send_out(Outbound(data, "notification", method=note.method))
        self.link.close_stream(request_id)

    # --- The handshake ---------------------------------------------------------------

    def _on_handshake_step(self, event: m.HandshakeStep) -> None:
        message = event.message
        self._cancel_handshake_timer()
        data = self._conn.send(message)
        request_id = message.id if isinstance(message, m.Request) else None
        self._send_out(Outbound(data, "handshake", method=message.method, request_id=request_id))
        if isinstance(message, m.Request) and not self._eof_fed:
            scope = self._handshake_timer = trio.CancelScope()
            self._nursery.start_soon(self._handshake_timeout_task, scope)

    async def _handshake_timeout_task(self, scope: trio.CancelScope) -> None:
        with scope:
            await trio.sleep(self._handshake_timeout)
            self._conn.handshake_timed_out()
            self._pump()

    def _cancel_handshake_timer(self) -> None:
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None

    def _end_handshake(self) -> None:
        self._cancel_handshake_timer()
        self._opened.set()

    async def _open(self) -> None:
        self._pump()  # the first handshake step, if any
        await self._wait_open()

    async def _wait_open(self) -> None:
        await self._opened.wait()
        if self._session_error is not None:
            error = self._session_error
            if self._lost is not None:
                raise self._lost_error()
            raise CallError(error.code, f"no session with the server: {error.message}", error.data)
        if self._closed:
            raise self._lost_error()

    # --- Calls: the engine's events ----------------------------------------------------

    async def _call_once(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        started: float,
        timeout: float | None,
        leg_timeout: float | None,
        input_timeout: float | None,
        max_rounds: int,
        on_progress: Callable[[m.Progress], None] | None,
        capabilities: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        await self._wait_open()
        conn = self._conn
        budget = None if timeout is None else timeout - (trio.current_time() - started)
        if budget is not None and budget <= 0:
            raise CallTimeout(trio.current_time() - started, timeout, "total")
        async with trio.open_nursery() as nursery:
            flow = _Flow(nursery, trio.current_time(), on_progress, input_timeout)
            flow.total_budget, flow.total_started = timeout, started
            try:
                flow.call = conn.call(
                    method,
                    params,
                    now=flow.started,
                    progress=on_progress is not None,
                    capabilities=capabilities,
                    leg_timeout=leg_timeout,
                    total_timeout=budget,
                    input_timeout=input_timeout,
                    max_rounds=max_rounds,
                )
            except m.LocalProtocolError as exc:
                flow.override = ClientError(f"cannot start {method}: {exc}")
                flow.finished.set()
            else:
                self._flows[flow.call] = flow
                if budget is not None:
                    nursery.start_soon(self._total_timer, flow, budget)
                try:
                    self._pump()
                    await flow.finished.wait()
                finally:
                    if not flow.finished.is_set():  # our caller gave up: cancel on the wire
                        conn.cancel(flow.call, trio.current_time())
                        self._pump()
                    self._flows.pop(flow.call, None)
            nursery.cancel_scope.cancel()
        return self._outcome(flow)

    def _outcome(self, flow: _Flow) -> dict[str, Any]:
        outcome = flow.outcome
        if isinstance(outcome, m.Done):
            return dict(outcome.result)
        if isinstance(outcome, m.TimedOut):
            if outcome.limit == "total" and flow.total_budget is not None:
                elapsed = trio.current_time() - flow.total_started
                raise CallTimeout(elapsed, flow.total_budget, "total")
            raise CallTimeout(outcome.elapsed, outcome.budget, outcome.limit)
        if isinstance(outcome, m.Failed):
            error = outcome.error
            if isinstance(error, m.InputFailed):
                raise InputUnavailable(error.reason, key=error.key) from flow.cause
            if isinstance(error, m.RoundLimitExceeded):
                if error.limit_name == "max_leg_reissues":
                    raise TransportError(
                        f"the response stream broke {error.limit + 1} times in a row",
                        kind="disconnect",
                    )
                raise RoundCapExceeded(
                    error.limit, limit_name=error.limit_name, last_result=error.last_result
                )
            if flow.lost is not None and not isinstance(error, m.PeerError):
                raise flow.lost.copy()
            raise CallError(error.code, error.message, error.data)
        if flow.override is not None:
            raise flow.override
        raise TransportError("the call was cancelled", kind="closed")

    def _on_call_event(self, event: m.CallEvent) -> None:
        step = event.event
        flow = self._flows.get(event.call)
        if flow is None:  # (cannot happen: a call is cancelled before it is forgotten)
            if isinstance(step, (m.SendRequest, m.SendRetry, m.CancelLeg)):
                self._send_out(Outbound(self._conn.send(event), "leg", call=event.call))
            return
        if isinstance(step, m.SendRequest):
            self._send_leg(flow, event)
        elif isinstance(step, m.SendRetry):
            flow.round = step.round
            self._close_inputs(flow)
            if step.delay > 0:
                flow.nursery.start_soon(self._send_leg_later, flow, event, step.delay)
            else:
                self._send_leg(flow, event)
        elif isinstance(step, m.CancelLeg):
            flow.leg_out = False
            self._disarm(flow.leg_timer)
            data = self._conn.send(event)  # stdio: notifications/cancelled; HTTP: nothing
            self._send_out(
                Outbound(
                    data,
                    "notification",
                    method="notifications/cancelled",
                    call=flow.call,
                    round=flow.round,
                )
            )
            if flow.leg_id is not None:
                self.link.close_stream(flow.leg_id)  # HTTP: closing the stream cancels
                flow.leg_id = None
        elif isinstance(step, m.RoundStarted):
            flow.round = step.round
            flow.leg_out = False
            self._disarm(flow.leg_timer)
            if step.keys:
                flow.inputs_open = True
                if step.input_timeout is not None:
                    flow.input_timer = self._arm(flow, step.input_timeout, self._input_expired)
        elif isinstance(step, m.DispatchInput):
            self._dispatch_input(flow, step)
        elif isinstance(step, m.CancelInputs):
            for key in step.keys:
                flow.pending.discard(key)
                scope = flow.inputs.pop(key, None)
                if scope is not None:
                    scope.cancel()
        elif isinstance(step, _TERMINAL):
            flow.outcome = step
            flow.lost = self._lost
            flow.leg_out = False
            self._disarm(flow.leg_timer)
            self._close_inputs(flow)
            flow.finished.set()

    def _send_leg(self, flow: _Flow, event: m.CallEvent) -> None:
        step = event.event
        assert isinstance(step, (m.SendRequest, m.SendRetry))
        try:
            data = self._conn.send(event)
        except m.LocalProtocolError as exc:  # e.g. max_outgoing requests already in flight
            if not flow.finished.is_set():
                flow.override = ClientError(f"cannot send the next leg: {exc}")
                self._conn.cancel(flow.call, trio.current_time())
                self._pump()
            return
        if not data:  # the call ended while this leg waited out its delay
            return
        self._disarm(flow.leg_timer)
        flow.leg_out = True
        out = Outbound(data, "leg", method=None, call=flow.call, round=flow.round)
        self._send_out(out)
        flow.leg_id = out.request_id
        if step.timeout is not None:
            flow.leg_timer = self._arm(flow, step.timeout, self._leg_expired)

    async def _send_leg_later(self, flow: _Flow, event: m.CallEvent, delay: float) -> None:
        await trio.sleep(delay)
        if not flow.finished.is_set():
            self._send_leg(flow, event)

    def _arm(self, flow: _Flow, delay: float, fire: Callable[[_Flow], None]) -> trio.CancelScope:
        scope = trio.CancelScope()
        flow.nursery.start_soon(self._timer, scope, flow, delay, fire)
        return scope

    async def _timer(
        self, scope: trio.CancelScope, flow: _Flow, delay: float, fire: Callable[[_Flow], None]
    ) -> None:
        with scope:
            await trio.sleep(max(delay, 0.0))
            if not flow.finished.is_set():
                fire(flow)

    @staticmethod
    def _disarm(scope: trio.CancelScope | None) -> None:
        if scope is not None:
            scope.cancel()

    def _leg_expired(self, flow: _Flow) -> None:
        if flow.leg_out:
            flow.leg_out = False
            self._conn.leg_timed_out(flow.call, trio.current_time())
            self._pump()

    def _input_expired(self, flow: _Flow) -> None:
        if flow.inputs_open:
            self._close_inputs(flow)
            self._conn.input_timed_out(flow.call, trio.current_time())
            self._pump()

    async def _total_timer(self, flow: _Flow, budget: float) -> None:
        await trio.sleep(budget)
        if not flow.finished.is_set():
            # Usually the engine's own leg or input timer (capped by the budget) ends the
            # flow first; this one covers the gaps (a retry's delay, the session opening).
            elapsed = trio.current_time() - flow.total_started
            flow.override = CallTimeout(elapsed, flow.total_budget, "total")
            self._conn.cancel(flow.call, trio.current_time())
            self._pump()

    def _close_inputs(self, flow: _Flow) -> None:
        flow.inputs_open = False
        flow.pending.clear()
        self._disarm(flow.input_timer)
        for scope in flow.inputs.values():
            scope.cancel()
        flow.inputs.clear()

    def _dispatch_input(self, flow: _Flow, step: m.DispatchInput) -> None:
        if not flow.inputs_open:
            return
        flow.pending.add(step.key)
        if self._answer is None:
            self._fail_input(flow, step.key, "this client has no input handler")
            return
        scope = flow.inputs[step.key] = trio.CancelScope()
        flow.nursery.start_soon(self._run_input, flow, step.key, step.request, scope)

    async def _run_input(
        self, flow: _Flow, key: str, request: m.InputRequest, scope: trio.CancelScope
    ) -> None:
        assert self._answer is not None
        with scope:
            try:
                answer = await self._answer(key, request)
            except InputUnavailable as exc:
                self._fail_input(flow, key, exc.reason)
                return
            except Exception as exc:
                flow.cause = exc
                self._fail_input(flow, key, f"the input handler failed: {exc!r}")
                return
            problem = _answer_problem(request, answer)
            if problem is not None:
                self._fail_input(flow, key, problem)
                return
            if flow.inputs_open and key in flow.pending:
                flow.pending.discard(key)
                flow.inputs.pop(key, None)
                self._conn.provide(flow.call, key, answer, trio.current_time())
                self._pump()

    def _fail_input(self, flow: _Flow, key: str, reason: str) -> None:
        if flow.inputs_open and key in flow.pending:
            self._close_inputs(flow)
            self._conn.fail_input(flow.call, key, reason)
            self._pump()

    def _fail_flow(self, out: Outbound, error: ClientError) -> None:
        flow = self._flows.get(out.call) if out.call is not None else None
        if flow is None or flow.finished.is_set():
            return
        flow.override = error
        self._conn.cancel(flow.call, trio.current_time())
        self._pump()

    def _fail_plain(self, request_id: m.RequestId, error: ClientError) -> None:
        waiter = self._waiters.get(request_id)
        if waiter is not None:
            waiter.settle(error=error)
        self._abandon(request_id)

    def _stream_broke(self, out: Outbound, error: TransportError) -> None:
        if out.kind == "leg":
            flow = self._flows.get(out.call) if out.call is not None else None
            if flow is not None and flow.leg_out and flow.leg_id == out.request_id:
                flow.leg_out = False
                flow.leg_id = None
                self._disarm(flow.leg_timer)
                logger.info("the response stream of a leg broke: re-issuing it (%s)", error)
                self._conn.leg_broken(flow.call, trio.current_time())
                self._pump()
        elif out.kind == "plain" and out.request_id is not None:
            self._fail_plain(out.request_id, error)
        else:
            self.link_lost(error)

    async def _list_tools_quietly(self) -> None:
        try:
            await self.list_tools()
        except CallError as exc:  # a server without tools/list: call without mirroring
            logger.warning("tools/list failed (%s): Mcp-Param headers cannot be mirrored", exc)
            self._tools_listed = True

    # --- A 2025-era server's requests ------------------------------------------------

    def _start_server_request(self, request: m.Request) -> None:
        live = [flow for flow in self._flows.values() if not flow.finished.is_set()]
        flow = live[0] if len(live) == 1 else None  # the call it belongs to, when clear
        nursery = flow.nursery if flow is not None else self._nursery
        nursery.start_soon(self._answer_server_request, request, flow)

    async def _answer_server_request(self, request: m.Request, flow: _Flow | None) -> None:
        def refuse(code: int, message: str) -> None:
            self._send_response(
                m.ErrorResponse(id=request.id, error=m.ErrorObject(code=code, message=message))
            )

        if request.method not in ("elicitation/create", "sampling/createMessage", "roots/list"):
            refuse(m.METHOD_NOT_FOUND, f"this client does not serve {request.method}")
            return
        try:
            asked = m.structure_input_request(
                {"method": request.method, "params": request.params or {}}
            )
        except m.MrtrError as exc:
            refuse(exc.code, f"cannot answer {request.method}: {exc.message}")
            return
        if m.missing_capability(asked, self._capabilities):
            refuse(m.INVALID_REQUEST, f"this client did not declare support for {request.method}")
            return
        key = request.method
        budget = flow.input_timeout if flow is not None else None
        started = trio.current_time()
        failure: ClientError | None = None
        answer: Any = None
        try:
            if self._answer is None:
                raise InputUnavailable("this client has no input handler", key=key)
            with trio.move_on_after(math.inf if budget is None else budget) as scope:
                answer = await self._answer(key, asked)
            if scope.cancelled_caught:
                failure = CallTimeout(trio.current_time() - started, budget, "input")
            elif (problem := _answer_problem(asked, answer)) is not None:
                failure = InputUnavailable(problem, key=key)
        except InputUnavailable as exc:
            failure = InputUnavailable(exc.reason, key=key)
        except Exception as exc:
            failure = InputUnavailable(f"the input handler failed: {exc!r}", key=key)
            failure.__cause__ = exc
        if failure is None:
            self._send_response(
                m.ResultResponse(id=request.id, result=m.unstructure_input_response(answer))
            )
            return
        refuse(m.INTERNAL_ERROR, f"no answer: {failure}")
        if flow is not None and not flow.finished.is_set():
            flow.override = failure
            self._conn.cancel(flow.call, trio.current_time())
            self._pump()

    # --- Notifications and tracing ---------------------------------------------------

    def _on_notification_event(self, note: m.Notification) -> None:
        if note.method == "notifications/message":
            params = note.params or {}
            level = _LOG_LEVELS.get(str(params.get("level")), logging.INFO)
            logger.log(level, "server log [%s]: %s", params.get("logger"), params.get("data"))
        if self._on_notification is not None:
            try:
                self._on_notification(note)
            except Exception:
                logger.exception("the on_notification callback failed")

    def _remember_trace_id(
        self, request_id: m.RequestId, flow: int | None, round_: int | None
    ) -> None:
        self._trace_ids[request_id] = (flow, round_)
        while len(self._trace_ids) > MAX_TRACE_IDS:
            self._trace_ids.popitem(last=False)

    def _trace(
        self,
        direction: Literal["send", "recv"],
        flow: int | None,
        round_: int | None,
        message: dict[str, Any],
    ) -> None:
        assert self._tracer is not None
        record = TraceRecord(direction, trio.current_time(), flow, round_, message)
        try:
            self._tracer(record)
        except Exception:
            logger.exception("the tracer failed")

    def _trace_received(self, data: bytes | bytearray) -> None:
        framer = self._trace_framer
        if framer is None:
            self._trace_message(data)
            return
        framer.feed(data)
        while isinstance(frame := framer.next_frame(), (bytes, m.Oversize)):
            if isinstance(frame, bytes):
                self._trace_message(frame)

    def _trace_message(self, data: bytes | bytearray) -> None:
        message = _decode(data)
        flow: int | None = None
        round_: int | None = None
        if "method" in message:
            params = message.get("params")
            token = params.get("progressToken") if isinstance(params, dict) else None
            if isinstance(token, (str, int)):
                flow, round_ = self._trace_ids.get(token, (None, None))
        elif isinstance(message.get("id"), (str, int)):
            flow, round_ = self._trace_ids.get(message["id"], (None, None))
            result = message.get("result")
            if (
                round_ is not None
                and isinstance(result, dict)
                and result.get("resultType") == "input_required"
            ):
                round_ += 1
        self._trace("recv", flow, round_, message)


def _single(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one exception in ``group`` (however nested), or None if there are several."""
    found: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for inner in exc.exceptions:
                walk(inner)
        else:
            found.append(exc)

    walk(group)
    return found[0] if len(found) == 1 else None


class ClientOptions(TypedDict, total=False):
    """The :class:`Client` options, as keywords of :func:`open_client` and of every
    link's opener (``open_stdio_client``, ``open_http_client``); unset ones take
    ``Client``'s defaults."""

    answer: InputHandler | None
    capabilities: Mapping[str, Any] | None
    era: Literal["auto", "modern", "legacy"]
    info: Mapping[str, Any] | None
    tracer: Tracer | None
    handshake_timeout: float
    log_level: str | None
    on_notification: Callable[[m.Notification], None] | None
    max_message_size: int
    max_calls: int
    max_outgoing: int


@asynccontextmanager
async def open_client(link: Link, **client_options: Unpack[ClientOptions]) -> AsyncIterator[Client]:
    """A :class:`Client` over ``link``, its session open (the era settled) on entry,
    the link shut down on exit.  Options as for :class:`Client`."""
    try:
        async with trio.open_nursery() as nursery:
            client = Client(link, nursery, **client_options)
            try:
                await link.start(client, nursery)
                await client._open()
                yield client
            finally:
                await client.aclose()
    except BaseExceptionGroup as group:
        # Link tasks never raise, so a group carries the caller's own exception: unwrap it.
        single = _single(group)
        if single is None:
            raise
        raise single from single.__cause__  # (keeps its cause, hides the group)
