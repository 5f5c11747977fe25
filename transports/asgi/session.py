"""One 2025-era session of the HTTP endpoint: its connection, its requests, its streams.

The model.  ``initialize`` made a long-lived server ``mrtr_core.Connection``
(``framing="messages"``) for the session; every later POST of the session
feeds that connection one message.  Each request runs as a task of the
session (not of the HTTP connection that carried it), and everything it sends
(progress, log lines, the legacy shim's questions, its response) is recorded
in the session's replay buffer (``mrtr_core.http.ReplayBuffer``) on the
request's own stream first; an HTTP response that carries the stream reads it
from there (``sessions.py``).  So a client that loses its stream loses
nothing: the request runs on, and a ``GET`` with ``Last-Event-ID`` reads the
rest.  Only an explicit ``notifications/cancelled`` or ``DELETE`` (or expiry)
cancels a request.

2025-era clients do not retry ``input_required`` results: each request of an
MRTR method runs through ``mrtr_core.server.LegacyShim``, whose questions
(``elicitation/create``, ``sampling/createMessage``, ``roots/list``) are real
server-to-client requests on the request's own stream; the client's answers
come as POSTs and are routed here to the waiting request, each waited for at
most ``legacy_answer_timeout`` seconds (past it the request gets -32603).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.abc

import mrtr_core as m

from ..server.app import Outcome, ServerApp, run_app
from ..server.driver import ConnectionOutlet, response_for, send_response
from ..server.legacy import LegacyFlow, run_legacy

__all__ = ["Session", "SessionOutlet"]

log = logging.getLogger("mrtr.server.http")

METHOD_NOT_FOUND = m.ErrorCode.METHOD_NOT_FOUND
SUBSCRIBE_METHODS = frozenset({"resources/subscribe", "resources/unsubscribe"})
LISTEN = "subscriptions/listen"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
#: Most URIs one session may subscribe to.
MAX_SUBSCRIBED_URIS = 256


class SessionOutlet(ConnectionOutlet):
    """A request's outlet in a session; ``close_sse_stream()`` ends the HTTP response
    that carries the request's stream now (the request runs on: SEP-1699 polling)."""

    def __init__(
        self,
        conn: m.Connection,
        request_id: m.RequestId,
        write: Any,
        cut: Callable[[], None],
    ) -> None:
        super().__init__(conn, request_id, write)
        self._cut = cut

    async def close_sse_stream(self) -> None:
        self._cut()


class _StandaloneOutlet:
    """Where the session's own ``subscriptions/listen`` of the app writes: the
    standalone stream, as 2025-era notifications (no subscription ``_meta``)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        return None

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        return None

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        if method == ACKNOWLEDGED:
            return
        plain = {k: v for k, v in (params or {}).items() if k != "_meta"}
        note = m.Notification(method=method, params=plain or None)
        self._session.emit(m.http._replay.STANDALONE, self._session.conn.send(note))


def _not_found(outcome: Outcome) -> bool:
    return isinstance(outcome, m.MrtrError) and outcome.code == METHOD_NOT_FOUND


class Session:
    """One session: its connection, replay buffer, running requests and readers."""

    def __init__(
        self,
        session_id: str,
        app: ServerApp,
        conn: m.Connection,
        buffer: m.http.ReplayBuffer,
        *,
        legacy_answer_timeout: float,
        on_work: Callable[[str, bool], None],
    ) -> None:
        self.id = session_id
        self.app = app
        self.conn = conn
        self.buffer = buffer
        self.legacy_answer_timeout = legacy_answer_timeout
        self._on_work = on_work  # (session id, started?) for the table's idle clock
        #: Set (and replaced) whenever something was recorded or a reader must look again.
        self.changed = anyio.Event()
        self.running: dict[m.RequestId, anyio.CancelScope] = {}
        self.questions: dict[m.RequestId, LegacyFlow] = {}  # our request id -> its flow
        #: The reader of each stream (a newer one replaces it), by stream number.
        self.readers: dict[int, object] = {}
        #: A standalone GET stream was opened: its events are recorded from then on.
        self.standalone_opened = False
        self.closed = False
        #: ``resources/subscribe`` URIs (when the session, not the app, keeps them).
        self.subscribed: dict[str, None] = {}
        self._listen_scope: anyio.CancelScope | None = None
        self.scope = anyio.CancelScope()
        self.nursery: anyio.abc.TaskGroup | None = None

    # --- life cycle ---

    async def run(
        self, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """The session's tasks live here until ``close``."""
        try:
            with self.scope:
                async with anyio.create_task_group() as nursery:
                    self.nursery = nursery
                    task_status.started()
                    await anyio.sleep_forever()
        finally:
            self.closed = True
            self.wake()

    def close(self) -> None:
        """DELETE, expiry, eviction or shutdown: cancel everything, end every stream."""
        self.closed = True
        self.scope.cancel()
        self.wake()

    def wake(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    # --- streams ---

    def emit(self, stream: int, data: bytes) -> None:
        """Record an event of ``stream`` (nothing for ``b""``: not due)."""
        if data and not self.closed:
            if stream == m.http._replay.STANDALONE and not self.standalone_opened:
                return  # nobody ever listened: keep the buffer for request streams
            # (an event too large to keep goes to a reader there now, or is lost)
            self.buffer.record(stream, data, live=stream in self.readers)
            self.wake()

    def cut(self, stream: int) -> None:
        """End the HTTP response now carrying ``stream`` (its reader stops)."""
        if self.readers.pop(stream, None) is not None:
            self.buffer.reader_gone(stream)
            self.wake()

    # --- requests ---

    def start_request(
        self, request: m.Request, stream: int, on_done: Callable[[], None] | None = None
    ) -> None:
        """Run ``request`` in the session; ``on_done()`` when it has ended."""
        assert self.nursery is not None
        # Registered now, so a cancellation that arrives before the task starts counts.
        self.running[request.id] = anyio.CancelScope()
        self._on_work(self.id, True)
        self.nursery.start_soon(self._run_request, request, stream, on_done)

    def cancel(self, request_id: m.RequestId) -> None:
        scope = self.running.get(request_id)
        if scope is not None:
            scope.cancel()

    def deliver(self, response: m.ResultResponse | m.ErrorResponse) -> bool:
        """A client's answer to one of our questions; ``False`` if nobody waits for it."""
        flow = self.questions.pop(response.id, None) if response.id is not None else None
        if flow is None:
            return False
        flow.deliver(response)
        return True

    async def _run_request(
        self, request: m.Request, stream: int, on_done: Callable[[], None] | None
    ) -> None:
        conn = self.conn
        scope = self.running[request.id]

        async def write(data: bytes) -> None:
            self.emit(stream, data)

        try:
            info = conn.request_info(request.id)
            outlet = SessionOutlet(conn, request.id, write, lambda: self.cut(stream))
            if request.method in m._meta.MRTR_METHODS:
                response = await run_legacy(
                    self.app,
                    conn,
                    request,
                    info,
                    outlet,
                    scope,
                    questions=self.questions,
                    write=write,
                    next_answer=self._next_answer,
                    unanswered=lambda: "did not answer in time",
                )
            else:
                outcome: Outcome = m.MrtrError("cancelled by the client")
                with scope:
                    outcome = await run_app(self.app, request, info, outlet)
                    if request.method in SUBSCRIBE_METHODS and _not_found(outcome):
                        outcome = self._subscribe(request)
                response = response_for(request.id, outcome)
            self.emit(stream, send_response(conn, response)[1])  # b"" when cancelled
        finally:
            del self.running[request.id]
            self.buffer.finish(stream)
            self.wake()
            self._on_work(self.id, False)
            if on_done is not None:
                on_done()

    # --- resources/subscribe, and the standalone stream's notifications ---

    def _subscribe(self, request: m.Request) -> Outcome:
        """``resources/subscribe`` / ``unsubscribe`` the app left to its transport: the
        session keeps the URIs (when the app offers subscriptions) and its standalone
        stream gets their ``notifications/resources/updated``."""
        resources = self.app.capabilities.get("resources")
        if not (isinstance(resources, Mapping) and resources.get("subscribe")):
            return m.MrtrError(f"Method not found: {request.method}", code=METHOD_NOT_FOUND)
        uri = (request.params or {}).get("uri")
        if not isinstance(uri, str):
            return m.MrtrError("params.uri must be a string", code=m.ErrorCode.INVALID_PARAMS)
        if request.method == "resources/unsubscribe":
            self.subscribed.pop(uri, None)
        elif uri not in self.subscribed:
            if len(self.subscribed) >= MAX_SUBSCRIBED_URIS:
                return m.MrtrError(
                    f"at most {MAX_SUBSCRIBED_URIS} subscribed URIs per session",
                    code=m.ErrorCode.INVALID_PARAMS,
                )
            self.subscribed[uri] = None
        self.restart_listen()
        return {}

    def restart_listen(self) -> None:
        """(Re)start the app's announcements for the standalone stream, once it was opened:
        the app's ``subscriptions/listen`` (as ``McpApp`` serves it), asked by the session."""
        if self._listen_scope is not None:
            self._listen_scope.cancel()
            self._listen_scope = None
        if self.standalone_opened and not self.closed and self.nursery is not None:
            self._listen_scope = anyio.CancelScope()
            self.nursery.start_soon(self._listen, self._listen_scope, list(self.subscribed))

    async def _listen(self, scope: anyio.CancelScope, uris: list[str]) -> None:
        wanted = {
            "toolsListChanged": True,
            "promptsListChanged": True,
            "resourcesListChanged": True,
            "resourceSubscriptions": uris,
        }
        request = m.Request(
            id=f"session-{self.id[:8]}", method=LISTEN, params={"notifications": wanted}
        )
        info = m.server.RequestInfo(
            id=request.id,
            method=LISTEN,
            era="modern",
            protocol_version=m.MODERN_VERSIONS[0],
            capabilities={},
            client_info=None,
            log_level=None,
            progress_token=None,
            retry=False,
        )
        with scope:
            outcome = await run_app(self.app, request, info, _StandaloneOutlet(self))
            if isinstance(outcome, m.MrtrError) and outcome.code != METHOD_NOT_FOUND:
                log.warning("session %s...: no announcements: %s", self.id[:8], outcome.message)

    async def _next_answer(self, flow: LegacyFlow) -> m.ResultResponse | m.ErrorResponse | None:
        with anyio.move_on_after(self.legacy_answer_timeout):
            return await flow.next_answer()
        return None
