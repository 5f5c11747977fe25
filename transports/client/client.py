"""The client: one logical MCP client over one link (a stdio child, an HTTP endpoint).

The model
---------
A :class:`Client` owns one client ``mrtr_core.Connection`` and a *link* that
moves its bytes (``client.stdio.StdioLink``, ``client.http.HttpLink``).  All
protocol logic is the connection's; the client only connects it to the loop
(anyio: trio or asyncio; its clock, events and cancel scopes looked up once,
:class:`~mrtr_transports._loop.LoopTools`), with two collaborators for the
opening and the plain requests:

* **One synchronous pump.**  After every input to the connection (bytes from
  the link, an answer, a timer) the client drains ``next_event`` and acts on
  each event at once: a leg or handshake step goes to ``link.transmit``, an
  answer wakes whoever waits, an input request goes to its call's handler.
  The pump never awaits, so events go out in the order the connection made
  them and a cancelled caller can still cancel its call on the wire.
* **Calls** (``tools/call``, ``prompts/get``, ``resources/read``) run the
  connection's round engine; each is a :class:`~mrtr_transports.client.flows.Flow`
  (its timers, legs and input tasks: :mod:`~mrtr_transports.client.flows`).
* **The era** is settled on opening (:class:`~mrtr_transports.client.handshaking.Opening`):
  ``era="auto"`` probes, ``"modern"``/``"legacy"`` do not, and ``prior=`` (a
  :class:`~mrtr_core.Verdict` an earlier client learned,
  ``client.verdict``) skips the probe; a wrong prior, or a stdio server that
  dies of the probe, gets one second chance (:mod:`~mrtr_transports.client.era`).
* **Tasks** (SEP-2663): a ``tools/call`` declares the extension (``tasks=True``);
  a task it becomes is polled to its end by the core's ``TaskPoller``, its asks
  answered by the same handler (:mod:`~mrtr_transports.client.tasks`);
  :meth:`Client.call_task` and :meth:`Client.task` hand the task to the caller.
* **Plain requests** (one answer, no rounds: ``request``, ``list_tools``) wait
  for their answer (:class:`~mrtr_transports.client.requests.PlainRequests`) and
  are withdrawn when given up.
* **A 2025-era session** hands out the server's own requests: they are
  answered through the same ``InputHandler``, the key being the method
  (:func:`~mrtr_transports.client.inputs.answer_server_request`).
* **Links** call back into the client (:mod:`~mrtr_transports.client.link`):
  :meth:`Client.receive_data` with what arrived, :meth:`Client.link_lost`
  when the link died (every live call then fails with that ``TransportError``),
  :meth:`Client.transmitted` once a message is on the wire, and for
  per-request streams (HTTP) :meth:`Client.response_ended` /
  :meth:`Client.response_failed`.
* **The trace** (``tracer=``): one
  :class:`~mrtr_transports.client.tracing.TraceRecord` per message
  (:mod:`~mrtr_transports.client.tracing`).

Bounds: calls in flight are bounded by the connection's ``max_calls`` and
``max_outgoing``; per call, at most one task per input key of the current round
(the server's round size; the first runs in the caller's task) and at most two
timers; the trace id table keeps the
last 4096 ids; ``list_tools`` follows at most 100 pages.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from importlib import metadata
from typing import Any, Literal, Unpack

import anyio
from anyio.abc import TaskGroup

import mrtr_core as m
from mrtr_core._connection._events import Sendable
from mrtr_core.tasks._gate import with_tasks

from .._loop import LoopTools
from . import listen as listening
from .cache import CacheMode, ResponseCache, ResponseCacheStore, flow_fetch, plain_fetch
from .era import EraControl, Verdict
from .errors import AuthorizationFailed, CallError, CallTimeout, ClientError, TransportError
from .flows import CallLimits, Flow, FlowContext, run_flow
from .handshaking import LinkState, Opening, Wire
from .inputs import InputHandler, answer_server_request
from .link import ClientOptions, Link, Outbound, OutboundKind
from .person_time import PersonTime
from .requests import PlainRequests, all_tools
from .tasks import TaskHandle, TaskStatusHandler, drive
from .tracing import TraceBook, Tracer, TraceRecord

__all__ = [
    "DEFAULT_CAPABILITIES",
    "Client",
    "ClientOptions",
    "InputHandler",
    "Link",
    "Outbound",
    "TraceRecord",
    "Tracer",
    "Verdict",
]

logger = logging.getLogger("mrtr.client")

#: What a client with an input handler but no ``capabilities=`` declares.
DEFAULT_CAPABILITIES: Mapping[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}
#: Seconds a handshake request (``server/discover``, ``initialize``) may take.
DEFAULT_HANDSHAKE_TIMEOUT = 10.0


def _our_info() -> dict[str, str]:
    try:
        version = metadata.version("mrtr")
    except metadata.PackageNotFoundError:  # running from a source tree
        version = "0"
    return {"name": "mrtr", "version": version}


class Client:
    """One logical MCP client over one link.  Made by ``open_stdio_client``,
    ``open_http_client`` or :func:`open_client`; see the module docstring."""

    def __init__(
        self,
        link: Link,
        task_group: TaskGroup,
        *,
        answer: InputHandler | None = None,
        capabilities: Mapping[str, Any] | None = None,
        era: Literal["auto", "modern", "legacy"] = "auto",
        prior: Verdict | None = None,
        info: Mapping[str, Any] | None = None,
        tracer: Tracer | None = None,
        handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
        log_level: str | None = None,
        on_notification: Callable[[m.Notification], None] | None = None,
        max_message_size: int = m._connection._options.DEFAULT_MAX_MESSAGE_SIZE,
        max_calls: int = m._connection._options.DEFAULT_MAX_CALLS,
        max_outgoing: int = m._connection._options.DEFAULT_MAX_IN_FLIGHT,
        cache: ResponseCacheStore | None = None,
        principal: str | None = None,
        tasks: bool = True,
        task_poll_bounds: tuple[float, float] = (
            m.tasks._poll.DEFAULT_MIN_INTERVAL,
            m.tasks._poll.DEFAULT_MAX_INTERVAL,
        ),
    ) -> None:
        if capabilities is None:
            capabilities = DEFAULT_CAPABILITIES if answer is not None else {}
        self.link = link
        self._task_group = task_group
        self._loop = LoopTools()  # (made on the loop that runs the client)
        #: A person signing in for the link (its OAuth provider's): not the server's time.
        self._person: PersonTime | None = getattr(link, "person_time", None)
        self._answer = answer
        self._capabilities = capabilities
        # Declare the tasks extension on tools/call (SEP-2663): this client handles
        # both answers, a result or a task, as a declaring client must.
        self._tasks = tasks
        #: A task's poll interval (the server's pollIntervalMs) is clamped to these seconds.
        self.task_poll_bounds = task_poll_bounds
        self._trace = (
            TraceBook(
                tracer,
                framing=link.framing,
                max_message_size=max_message_size,
                clock=self._loop.now,
            )
            if tracer is not None
            else None
        )
        #: The response cache (``cache=`` a store; :mod:`~mrtr_transports.client.cache`).
        self.cache = ResponseCache.for_link(cache, link, principal) if cache is not None else None
        self._notes = listening.Notifications(task_group, self.cache, on_notification)
        self._opening = Opening(
            EraControl(era, prior),
            timeout=handshake_timeout,
            loop=self._loop,
            task_group=task_group,
            restartable=getattr(link, "respawns", False),
            send_step=self._send_step,
            pump=self._pump,
            reconnect=self._reconnect,
            idle=self._idle_but_one,
            person=self._person,
        )
        self._requests = PlainRequests(self._withdraw)
        self._connection_options: dict[str, Any] = {
            "framing": link.framing,
            "cancellation": link.cancellation,
            "info": info if info is not None else _our_info(),
            "capabilities": capabilities,
            "log_level": log_level,
            "max_message_size": max_message_size,
            "max_buffer_size": max(
                4 * max_message_size, m._connection._options.DEFAULT_MAX_BUFFER_SIZE
            ),
            "max_calls": max_calls,
            "max_outgoing": max_outgoing,
        }
        self._flows: dict[int, Flow] = {}
        self._closing = False
        self._pumping = False
        self._new_connection()

    def _new_connection(self) -> None:
        """A fresh client connection in the era the era control says (again, after a
        wrong prior or a probe the server died of)."""
        control = self._opening.control
        self._conn = m.Connection(
            m.CLIENT, era=control.era, versions=control.versions(), **self._connection_options
        )
        self._state = LinkState()
        self._opening.begin(Wire(self._conn, self._state))
        self._tools_listed = False
        self._flow_context = FlowContext(
            conn=self._conn,
            task_group=self._task_group,
            pump=self._pump,
            send_out=self._send_out,
            outbound=self._outbound,
            close_stream=self.link.close_stream,
            lost=lambda: self._state.lost,
            answer=self._answer,
            loop=self._loop,
            person=self._person,
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
        return self._opening.instructions

    @property
    def verdict(self) -> Verdict | None:
        """What the client learned of the server's era (``None`` until settled): pass it
        back as ``prior=`` to skip the probe next time (``verdict.to_json()`` to store)."""
        return self._opening.verdict()

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
        max_state_only_legs: int = 10,
        url_wait_timeout: float | None = m.engine._engine.DEFAULT_URL_WAIT,
        on_progress: Callable[[m.Progress], None] | None = None,
        capabilities: Mapping[str, Any] | None = None,
        cache: CacheMode = "use",
        on_task_status: TaskStatusHandler | None = None,
    ) -> dict[str, Any]:
        """Run a multi round-trip call (``tools/call``, ``prompts/get``,
        ``resources/read``) to its end and return the complete result.

        ``timeout`` is the whole-flow budget, ``leg_timeout`` the server's time
        per leg, ``input_timeout`` the time per round for the answers.
        ``max_rounds`` caps the rounds that ask for input, ``max_state_only_legs``
        the legs in a row that carry only ``requestState`` (no answers): past
        either the call ends with ``RoundCapExceeded`` naming it; after an accepted
        URL elicitation the state-only legs wait for a person instead, bounded by
        ``url_wait_timeout`` seconds (``CallTimeout``, ``None``: no bound).  Raises
        ``CallError``, ``CallTimeout``, ``RoundCapExceeded``,
        ``TransportError`` or ``InputUnavailable``.  ``capabilities`` replaces
        the client's for this call.  ``cache``: how the response cache is used for
        ``resources/read``, if there is one (a result that took rounds is never stored).

        A ``tools/call`` declares the tasks extension (SEP-2663) unless the client was
        made with ``tasks=False``: a server may then answer with a task, which is
        polled to its end (:mod:`~mrtr_transports.client.tasks`; ``timeout`` bounds it
        too, ``leg_timeout`` each of its requests, ``on_task_status(task_id, change)``
        is told its status changes) and its result returned as a sync call's is.  A
        task the server cancels raises ``TaskCancelled``.
        """
        started = self._loop.now()
        if method == "tools/call" and self._tasks:
            capabilities = with_tasks(
                capabilities if capabilities is not None else self._capabilities
            )
        result = await self._mrtr_phase(
            method,
            params,
            started,
            timeout,
            leg_timeout,
            input_timeout,
            max_rounds,
            max_state_only_legs,
            url_wait_timeout,
            on_progress,
            capabilities,
            cache,
        )
        if result.get("resultType") != "task":
            return result
        # (the round engine lets a task through only to a tools/call that declared it)
        declared = capabilities if capabilities is not None else self._capabilities
        created = m.tasks.CreateTaskResult.from_result(result)
        remaining = None if timeout is None else max(timeout - (self._loop.now() - started), 1e-6)
        try:
            return await drive(
                created,
                send=self._send_task_request,
                answer=self._answer,
                capabilities=declared,
                loop=self._loop,
                timeout=remaining,
                request_timeout=leg_timeout,
                on_status=on_task_status,
                min_interval=self.task_poll_bounds[0],
                max_interval=self.task_poll_bounds[1],
            )
        except CallTimeout as exc:
            if timeout is None or exc.limit != "total":
                raise
            raise CallTimeout(self._loop.now() - started, timeout, "total") from None

    async def _mrtr_phase(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        started: float,
        timeout: float | None,
        leg_timeout: float | None,
        input_timeout: float | None,
        max_rounds: int,
        max_state_only_legs: int,
        url_wait_timeout: float | None,
        on_progress: Callable[[m.Progress], None] | None,
        capabilities: Mapping[str, Any] | None,
        cache: CacheMode,
    ) -> dict[str, Any]:
        """The call's rounds, to its complete result (or the task it became)."""
        limits = CallLimits(
            timeout, leg_timeout, input_timeout, max_rounds, max_state_only_legs, url_wait_timeout
        )
        mirrors = self.link.wants_tool_list and self.era != "legacy"  # (2025: no Mcp-Param-*)
        if method == "tools/call" and mirrors and not self._tools_listed:
            await self._list_tools_quietly(timeout=leg_timeout)  # (a leg of its own)

        def flow(
            on_rounds: Callable[[int], None] | None = None,
        ) -> Awaitable[dict[str, Any]]:  # (the context of the connection in use)
            return run_flow(
                self._flow_context,
                self._flows,
                method,
                params,
                started=started,
                limits=limits,
                on_progress=on_progress,
                capabilities=capabilities,
                on_rounds=on_rounds,
            )

        if not self._opening.ready:
            await self._opening.wait()  # (open: no pass of the run loop, the call waits anyway)
        if self.cache is not None and method == "resources/read":
            first_chance = functools.partial(self._first_chance_with, flow)
            return await self.cache.fetch(method, params, flow_fetch(first_chance), cache)
        try:
            return await self._opening.first_chance(flow)
        except CallError as exc:
            # HTTP: the server's tool schema changed under us; list again and retry once.
            if not (
                exc.code == m.ErrorCode.HEADER_MISMATCH
                and method == "tools/call"
                and self.link.wants_tool_list
            ):
                raise
            logger.info("header mismatch on tools/call: listing tools again and retrying once")
            await self._list_tools_quietly(cache="refresh", timeout=leg_timeout)
            return await flow()

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, **call_options: Any
    ) -> dict[str, Any]:
        """``tools/call`` of ``name`` with ``arguments``; options as for :meth:`call`."""
        params = {"name": name, "arguments": dict(arguments or {})}
        return await self.call("tools/call", params, **call_options)

    # --- Tasks (:mod:`~mrtr_transports.client.tasks`) -----------------------------------

    async def call_task(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        leg_timeout: float | None = None,
        input_timeout: float | None = None,
        max_rounds: int = 10,
        max_state_only_legs: int = 10,
        capabilities: Mapping[str, Any] | None = None,
    ) -> TaskHandle:
        """``tools/call`` of ``name``, declaring the tasks extension (whatever ``tasks=``
        says), its MRTR rounds answered as :meth:`call` answers them; the task the
        server answered with, as a :class:`~mrtr_transports.client.tasks.TaskHandle`
        (``task_id``: persist it to take the task up again with :meth:`task`).  A
        server that answers without a task gives a complete handle (``task_id`` is
        ``None``, ``await handle.result()`` its result).  ``timeout`` bounds the rounds."""
        declared = with_tasks(capabilities if capabilities is not None else self._capabilities)
        params = {"name": name, "arguments": dict(arguments or {})}
        result = await self._mrtr_phase(
            "tools/call",
            params,
            self._loop.now(),
            timeout,
            leg_timeout,
            input_timeout,
            max_rounds,
            max_state_only_legs,
            m.engine._engine.DEFAULT_URL_WAIT,
            None,
            declared,
            "use",
        )
        if result.get("resultType") != "task":
            return self._task_handle(None, declared, result=result)
        created = m.tasks.CreateTaskResult.from_result(result)
        return self._task_handle(created.task_id, declared, created=created)

    def task(self, task_id: str, *, capabilities: Mapping[str, Any] | None = None) -> TaskHandle:
        """A handle on a task this client (or an earlier one) was given, by its id: to
        poll it again after a restart (the SEP: clients persist task ids)."""
        if not isinstance(task_id, str) or not task_id:
            raise ClientError(f"a task id is a non-empty string, not {task_id!r}")
        declared = with_tasks(capabilities if capabilities is not None else self._capabilities)
        return self._task_handle(task_id, declared)

    def _task_handle(
        self,
        task_id: str | None,
        capabilities: Mapping[str, Any],
        *,
        created: m.tasks.CreateTaskResult | None = None,
        result: Mapping[str, Any] | None = None,
    ) -> TaskHandle:
        return TaskHandle(
            task_id=task_id,
            created=created,
            result=result,
            send=self._send_task_request,
            answer=self._answer,
            capabilities=capabilities,
            loop=self._loop,
            poll_bounds=self.task_poll_bounds,
        )

    async def _send_task_request(
        self, method: str, params: Mapping[str, Any], timeout: float | None
    ) -> dict[str, Any]:
        """One task request: a plain request (never cached), traced like every other."""
        return await self._plain_request(method, params, timeout=timeout)

    # --- Plain requests (:mod:`~mrtr_transports.client.requests`) ---------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        cache: CacheMode = "use",
    ) -> dict[str, Any]:
        """A plain request (no rounds): its result, or ``CallError``/``CallTimeout``/
        ``TransportError``.  ``cache``: how the response cache is used, if there is one."""
        fetch = functools.partial(self._plain_request, method, params, timeout=timeout)
        if self.cache is None:
            return await fetch()
        return await self.cache.fetch(method, params, plain_fetch(fetch), cache)

    async def _plain_request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        on_id: Callable[[m.RequestId], None] | None = None,
    ) -> dict[str, Any]:
        await self._opening.wait()

        def send() -> Awaitable[dict[str, Any]]:  # (on the connection in use by then)
            return self._requests.send(
                self._flow_context, method, params, timeout=timeout, on_id=on_id
            )

        return await self._opening.first_chance(send)

    async def list_tools(
        self, *, cache: CacheMode = "use", timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """Every tool of ``tools/list`` (all pages, ``timeout`` each).  Over HTTP the tools
        whose ``x-mcp-header`` annotations are invalid are dropped (with a warning) and
        the rest are kept for mirroring arguments into ``Mcp-Param-*`` headers."""
        tools = await all_tools(
            lambda params: self.request("tools/list", params, timeout=timeout, cache=cache)
        )
        kept = self.link.tools_listed(tools)
        self._tools_listed = True
        return kept

    async def _list_tools_quietly(
        self, cache: CacheMode = "use", timeout: float | None = None
    ) -> None:
        try:
            await self.list_tools(cache=cache, timeout=timeout)
        except CallError as exc:  # a server without tools/list: call without mirroring
            logger.warning("tools/list failed (%s): Mcp-Param headers cannot be mirrored", exc)
            self._tools_listed = True

    def _withdraw(self, request_id: m.RequestId) -> None:
        """Give up on a plain request: cancel it on the wire (stdio) or close its stream."""
        if self._state.eof_fed or not self.is_waiting_for(request_id):
            return
        note = m.Notification(method="notifications/cancelled", params={"requestId": request_id})
        try:  # (also forgets the id, so a late answer is dropped)
            out = self._outbound(note, "notification", method=note.method)
        except m.LocalProtocolError:
            return
        # Links that cancel by message (stdio, WebSocket) and 2025 HTTP (a POST) send it.
        if self.link.cancellation == "notify" or self.era == "legacy":
            self._send_out(out)
        self.link.close_stream(request_id)

    async def _first_chance_with(
        self, flow: Callable[..., Awaitable[dict[str, Any]]], on_rounds: Callable[[int], None]
    ) -> dict[str, Any]:
        return await self._opening.first_chance(functools.partial(flow, on_rounds))

    async def aclose(self) -> None:
        """Fail what is still running with ``TransportError(kind="closed")`` and shut
        the link down (a stdio child: close stdin, wait, SIGTERM, wait, SIGKILL)."""
        if self._closing:
            return
        self._closing = True
        self.link_lost(TransportError("the client was closed", kind="closed"))
        with anyio.CancelScope(shield=True):
            await self.link.aclose()
        self._task_group.cancel_scope.cancel()

    # --- Callbacks for links ---------------------------------------------------------

    def receive_data(self, data: bytes | bytearray) -> None:
        """Bytes from the link (with ``framing="messages"``: exactly one message)."""
        if self._state.eof_fed or not data:
            return
        if self._trace is not None:
            self._trace.received(data)
        try:
            self._conn.receive_data(data)
        except m.LocalProtocolError as exc:  # the buffer bound: cannot happen while we pump
            self.link_lost(TransportError(f"cannot buffer what the server sent: {exc}"))
            return
        self._pump()

    def transmitted(self, out: Outbound) -> None:
        """``out`` is on the wire: the trace records it as sent (once).  Links with
        ``confirms_transmission`` call this; for the others the client does."""
        if self._trace is None or out.traced:
            return
        out.traced = True
        assert out.message is not None
        self._trace.sent(out.call, out.round, out.message)

    def link_lost(self, error: TransportError) -> None:
        """The link is gone: every live call and request fails with ``error``."""
        state = self._state
        if state.lost is None:
            state.lost = error
            # (the one case where a stdio child gets started again: it died of the probe)
            state.lost_while_probing = self._conn.session_state is m.SessionState.DISCOVERING
        if not state.eof_fed:
            state.eof_fed = True
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
            self._requests.fail(out.request_id, error)
        elif (
            out.method == "server/discover"
            and error.kind == "http"
            and not isinstance(error, AuthorizationFailed)  # (final: no other era)
        ):
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
            now = self._loop.now()
            while True:
                event = conn.next_event(now)
                if event is m.NEED_DATA:
                    break
                if isinstance(event, m.ConnectionClosed):
                    if not self._state.closed:  # (handed out for ever once the stream ended)
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
            if not self._requests.answered(event) and isinstance(event, m.ErrorResponse):
                logger.warning("the server could not read a message: %s", event.error.message)
        elif isinstance(event, m.HandshakeStep):
            self._opening.step(event)
        elif isinstance(event, m.SessionOpened):
            self._opening.settled(instructions=event.instructions)
        elif isinstance(event, m.SessionFailed):
            self._opening.settled(refusal=event.error)
        elif isinstance(event, m.Request):  # a 2025-era server asks us something
            self._start_server_request(event)
        elif isinstance(event, m.AutoReply):  # a 2025-era ping
            self._send_response(event.reply)
        elif isinstance(event, m.Notification):
            self._on_notification_event(event)
        elif isinstance(event, m.RequestCancelled):
            self._requests.cancelled(event.request_id)
        elif isinstance(event, m.InvalidMessage):
            logger.warning("ignored a bad message from the server: %s", event.error)
        elif isinstance(event, m.ConnectionClosed):
            self._state.closed = True
            self._opening.settled()
            self._requests.fail_all(self._state.error)

    def _outbound(self, event: Sendable, kind: OutboundKind, **fields: Any) -> Outbound:
        """``event`` through the connection, for the link: the bytes to write and, when
        the trace or the link wants it, the message as sent (never decoded again)."""
        message = self._conn.send_message(event)
        if message is None:
            return Outbound(b"", kind, **fields)
        if isinstance(message, m.Request):  # the id the connection picked, for every link
            fields.setdefault("request_id", message.id)
        if isinstance(message, (m.Request, m.Notification)):
            fields.setdefault("method", message.method)
        wanted = self._trace is not None or self.link.needs_messages
        shown = m.wire.message_to_json(message) if wanted else None
        return Outbound(self._conn.encode(message), kind, message=shown, **fields)

    def _send_out(self, out: Outbound) -> None:
        if not out.data:
            return
        if self._trace is not None and out.request_id is not None:
            self._trace.remember(out.request_id, out.call, out.round)
        if not self.link.confirms_transmission:
            self.transmitted(out)
        self.link.transmit(out)

    def _send_response(self, response: m.ResultResponse | m.ErrorResponse) -> None:
        try:
            out = self._outbound(response, "response", request_id=None)
        except m.LocalProtocolError as exc:
            logger.warning("could not answer the server's request: %s", exc)
            return
        self._send_out(out)

    def _send_step(self, message: m.Request | m.Notification) -> None:
        """A handshake step (for the opening)."""
        request_id = message.id if isinstance(message, m.Request) else None
        self._send_out(
            self._outbound(message, "handshake", method=message.method, request_id=request_id)
        )

    async def _reconnect(self) -> None:
        """A new connection in the era control's era, over the link restarted (for the
        opening's second chances)."""
        self._new_connection()
        restart = getattr(self.link, "restart", None)
        if restart is not None:
            await restart(self, self._task_group)

    def _idle_but_one(self) -> bool:
        """Nothing in flight besides the request that just failed (safe to start over)."""
        live = [flow for flow in self._flows.values() if not flow.finished]
        return not live and not self._requests.waiters

    async def _open(self) -> None:
        """Open the session (``open_client``; see :class:`~.handshaking.Opening`)."""
        await self._opening.open()

    # --- Calls: their flows ------------------------------------------------------------

    def _on_call_event(self, event: m.CallEvent) -> None:
        flow = self._flows.get(event.call)
        if flow is not None:
            flow.on_event(event)
        elif isinstance(
            event.event, (m.engine.SendRequest, m.engine.SendRetry, m.engine.CancelLeg)
        ):
            # (cannot happen: a call is cancelled before it is forgotten)
            self._send_out(self._outbound(event, "leg", call=event.call))

    def _fail_flow(self, out: Outbound, error: ClientError) -> None:
        flow = self._flows.get(out.call) if out.call is not None else None
        if flow is not None:
            flow.fail(error)

    def _stream_broke(self, out: Outbound, error: TransportError) -> None:
        if out.kind == "leg":
            flow = self._flows.get(out.call) if out.call is not None else None
            if flow is not None:
                flow.leg_broke(out, error)
        elif out.kind == "plain" and out.request_id is not None:
            self._requests.fail(out.request_id, error)
        else:
            self.link_lost(error)

    # --- A 2025-era server's requests ------------------------------------------------

    def _start_server_request(self, request: m.Request) -> None:
        live = [flow for flow in self._flows.values() if not flow.finished]
        flow = live[0] if len(live) == 1 else None  # the call it belongs to, when clear
        if flow is not None:
            flow.spawn(self._answer_server_request, request, flow)
        else:
            self._task_group.start_soon(self._answer_server_request, request, flow)

    async def _answer_server_request(self, request: m.Request, flow: Flow | None) -> None:
        budget = flow.input_timeout if flow is not None else None
        if flow is not None:
            flow.answering_started()  # (the person's time is not the leg's)
        try:
            response, failure = await answer_server_request(
                request, self._answer, self._capabilities, budget
            )
            self._send_response(response)
        finally:
            if flow is not None:
                flow.answering_ended()
        if failure is not None and flow is not None:
            flow.fail(failure)

    # --- Notifications and listen streams (:mod:`~mrtr_transports.client.listen`) ----------

    def listen(
        self, **options: Unpack[listening.ListenOptions]
    ) -> AbstractAsyncContextManager[listening.Subscription]:
        """``subscriptions/listen``: ``async with client.listen(tools=True) as sub``;
        options as for :func:`mrtr_transports.client.listen.listen`."""
        return listening.listen(self, **options)

    def on_list_changed(self, kind: listening.ListKind, handler: listening.Handler) -> None:
        """Call ``handler(notification)`` on each ``notifications/{kind}/list_changed``."""
        self._notes.add_handler(listening.LIST_CHANGED[kind], handler)

    def on_resource_updated(self, handler: listening.Handler) -> None:
        """Call ``handler(notification)`` on each ``notifications/resources/updated``."""
        self._notes.add_handler(listening.RESOURCE_UPDATED, handler)

    def _on_notification_event(self, note: m.Notification) -> None:
        self._notes.deliver(note)
