"""The 2025-era side of the endpoint: sessions, their POSTs, GET streams, DELETE (ASGI, anyio).

The model (the rules themselves are the core's: ``mrtr_core.http``'s
``read_legacy_headers``, ``SessionTable`` and ``ReplayBuffer``):

* A POSTed ``initialize`` (no 2026 ``_meta``) opens a session: a long-lived
  server connection (``session.py``) under a fresh ``Mcp-Session-Id``
  (``secrets.token_urlsafe``: 43 visible ASCII characters, unguessable), named
  in the response header.  Every later message of the client carries it:
  without it 400, for a session this server does not hold (never opened,
  expired, deleted, evicted) 404, after which the client initializes again.
* A POSTed request gets an SSE stream of its own: first a priming event (an
  id, empty data, and ``retry``), then whatever the request sends (progress,
  log lines, the legacy shim's questions), then its response, which ends the
  stream.  Every event has an id; a client that lost the stream sends a
  ``GET`` with ``Last-Event-ID`` and reads on from there (from the session's
  bounded replay buffer), to the end.  A request whose stream is cut runs on.
* A POSTed notification or response (an answer to one of the shim's
  questions, routed to the request waiting for it) gets 202.
* A ``GET`` without ``Last-Event-ID`` opens the session's standalone stream
  (one at a time: 409 for a second); a ``DELETE`` ends the session and
  cancels its requests (204).  A GET stream lasts ``session_stream_lifetime``
  seconds at most, then ends gracefully: its client comes back with
  ``Last-Event-ID``.  It is no work of the session: an open GET stream alone
  neither keeps a session from being ended to make room nor, past its
  lifetime, from expiring (its end counts as a use).
* Sessions live at most ``max_sessions`` at once, ``max_sessions_per_client``
  of them for one client (``ClientShares``, keyed by the client's address),
  and end after ``session_idle_timeout`` seconds without work (a running
  request is work).  A client past its share ends its *own* session idle the
  longest (429 when each of its own has work): a client that restarts and
  never sends ``DELETE`` is not locked out for ``session_idle_timeout``, and
  it cannot end another client's session.  With the table full (many
  clients), a newcomer ends the idle session used the longest ago of the
  client holding the most (of anyone's when all of those have work), or gets
  503 when every session is busy.
* A session's requests and streams may last long (a person answering a
  question): they hold places in a pool of their own
  (``pools.SessionStreams``: ``max_session_streams`` in all,
  ``max_streams_per_session`` each, ``max_session_streams_per_client`` for
  one client; 503 (429 for the client's share) with ``Retry-After`` past it,
  before the request is read).  A request holds its place until it ends,
  even when its client left its stream.

Where a session's tasks live: a session outlives the HTTP requests that reach
it, so its requests run in a task group of the endpoint's (``run``), which the
ASGI ``lifespan`` holds (or ``McpAsgi.lifespan()``, for a framework that runs
the lifespan itself).  Without it, an ``initialize`` is refused (400, -32022):
the endpoint then serves 2026-07-28 only.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.abc

import mrtr_core as m
from mrtr_core.http import ReplayLost, SessionRefused, SessionTable
from mrtr_core.http._replay import STANDALONE, Cursor

from .._shares import ClientShares, ShareRefusal
from ..server.app import ServerApp
from .answer import Receive, Send, Sender, send_whole, watch_disconnect
from .policy import Headers
from .pools import SessionStreams
from .session import Session

__all__ = ["SSE_RETRY_MS", "SessionEndpoint"]

log = logging.getLogger("mrtr.server.http")

#: The ``retry`` (milliseconds) of each stream's priming event: how soon a client
#: whose stream was closed comes back with ``Last-Event-ID``.
SSE_RETRY_MS = 500
#: Bytes of an SSE session id (``secrets.token_urlsafe``: about 1.3 characters each).
SESSION_ID_BYTES = 32
RETRY_1 = [(b"retry-after", b"1")]


class _Place:
    """A place in the session streams' pool, given back once."""

    def __init__(self, pool: SessionStreams, session_id: str, client: str) -> None:
        self.pool = pool
        self.session_id = session_id
        self.client = client
        self.handed_over = False
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self.pool.release(self.session_id, self.client)


async def _error(
    send: Send,
    status: int,
    message: str,
    code: int = m.ErrorCode.INVALID_REQUEST,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """An HTTP error whose body is a JSON-RPC error response without id."""
    await send_whole(send, status, m.http._post.error_body(message, code), extra=extra)


async def _refuse(send: Send, refusal: ShareRefusal) -> None:
    """A share's refusal: 429 (the client's own share) or 503, retryable in a second."""
    await _error(send, refusal.status, refusal.message, m.ErrorCode.SERVER_BUSY, RETRY_1)


async def _reply(
    send: Send,
    reply: m.ResultResponse | m.ErrorResponse,
    data: bytes,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    status = 200
    if isinstance(reply, m.ErrorResponse):
        status = m.http.status_for_error(reply.error.code)
    await send_whole(send, status, data, extra=extra)


class SessionEndpoint:
    """The sessions of one endpoint and its answers to 2025-era requests."""

    def __init__(
        self,
        app: ServerApp,
        *,
        max_sessions: int,
        max_sessions_per_client: int,
        idle_timeout: float,
        replay_events: int,
        replay_bytes: int,
        legacy_answer_timeout: float,
        max_streams: int,
        max_streams_per_session: int,
        max_streams_per_client: int,
        stream_lifetime: float,
        keepalive_interval: float,
        write_timeout: float,
        connection_options: Mapping[str, Any],
    ) -> None:
        self.app = app
        self.table = SessionTable(max_sessions, idle_timeout)
        #: Each client's share of the table (the table's own bound is the total).
        self.shares = ClientShares(
            max_sessions,
            max_sessions_per_client,
            what="2025-era sessions",
            total_setting="max_sessions",
            per_client_setting="max_sessions_per_client",
        )
        #: Whose each session is (the key its share counts against).
        self.owners: dict[str, str] = {}
        self.replay_events = replay_events
        self.replay_bytes = replay_bytes
        self.legacy_answer_timeout = legacy_answer_timeout
        self.streams = SessionStreams(max_streams, max_streams_per_session, max_streams_per_client)
        #: A GET stream ends gracefully after this (never outliving the idle timeout).
        self.stream_lifetime = min(stream_lifetime, idle_timeout)
        self.keepalive_interval = keepalive_interval
        self.write_timeout = write_timeout
        self.connection_options = dict(connection_options)
        self.sessions: dict[str, Session] = {}
        self.tasks: anyio.abc.TaskGroup | None = None

    # --- life cycle ---

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Hold the sessions' tasks; end idle sessions as they expire."""
        try:
            async with anyio.create_task_group() as tasks:
                self.tasks = tasks
                task_status.started()
                period = min(self.table.idle_timeout / 2, 30.0)
                while True:
                    await anyio.sleep(period)
                    for session_id in self.table.expired(anyio.current_time()):
                        log.info("session %s... expired", session_id[:8])
                        self.end(session_id)
        finally:
            self.tasks = None

    def end(self, session_id: str) -> None:
        self.table.remove(session_id)
        owner = self.owners.pop(session_id, None)
        if owner is not None:
            self.shares.release(owner)
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.close()

    def shutting_down(self) -> None:
        """Shutdown begins: standalone streams end now; requests get the grace time."""
        for session in self.sessions.values():
            session.cut(STANDALONE)

    def close_all(self) -> None:
        for session_id in list(self.sessions):
            self.end(session_id)

    def _on_work(self, session_id: str, started: bool) -> None:
        if started:
            self.table.begin(session_id)
        else:
            self.table.end(session_id, anyio.current_time())

    def _lookup(self, headers: Headers, *, initialize: bool = False) -> tuple[Session | None, Any]:
        read = m.http.read_legacy_headers(headers.fields, initialize=initialize)
        if initialize:
            return None, read
        assert read.session_id is not None
        session = self.sessions.get(read.session_id)
        try:
            self.table.lookup(read.session_id, anyio.current_time())
        except SessionRefused:
            if session is not None:  # expired, not yet swept
                self.end(read.session_id)
            raise
        assert session is not None
        return session, read

    # --- POST ---

    async def post(
        self,
        receive: Receive,
        send: Send,
        headers: Headers,
        message: Mapping[str, Any],
        json_ok: bool,
        sse_ok: bool,
        client: str,
    ) -> None:
        """A POSTed message of a session (or an ``initialize``); ``client`` is whose
        share its places count against (``_shares.client_key``)."""
        initialize = message.get("method") == "initialize"
        try:
            session, _ = self._lookup(headers, initialize=initialize)
        except SessionRefused as exc:
            await _error(send, exc.status, exc.message, exc.code)
            return
        if session is None:
            await self._initialize(send, message, json_ok, client)
            return
        # A request may wait long (a person answering a question): it holds a place in
        # the session streams' pool until it ends, and is refused, retryably, when there
        # is none, before the session reads it.
        place: _Place | None = None
        if isinstance(message.get("method"), str) and "id" in message:
            refusal = self.streams.admit(session.id, client)
            if refusal is not None:
                log.warning("session stream refused: %s", refusal.message)
                await _refuse(send, refusal)
                return
            place = _Place(self.streams, session.id, client)
        try:
            await self._session_message(receive, send, session, message, sse_ok, place)
        finally:
            if place is not None and not place.handed_over:
                place.release()

    async def _session_message(
        self,
        receive: Receive,
        send: Send,
        session: Session,
        message: Mapping[str, Any],
        sse_ok: bool,
        place: _Place | None,
    ) -> None:
        conn = session.conn
        conn.receive_message(dict(message))
        now = anyio.current_time()
        primary: m.Request | m.AutoReply | m.InvalidMessage | None = None
        while (event := conn.next_event(now)) is not m.NEED_DATA:  # (one message: few events)
            if isinstance(event, (m.Request, m.AutoReply, m.InvalidMessage)):
                primary = event  # what this POST is answered with
            elif isinstance(event, m.RequestCancelled):
                session.cancel(event.request_id)
            elif isinstance(event, (m.ResultResponse, m.ErrorResponse)) and not session.deliver(
                event
            ):
                log.info("session %s...: an answer nobody waits for", session.id[:8])
            # (SessionOpened and other notifications: nothing to do.)
        if isinstance(primary, m.Request):
            if not sse_ok:
                refused = m.MrtrError(
                    "Accept must include text/event-stream: a request's answer is a stream",
                    code=m.ErrorCode.INVALID_REQUEST,
                )
                data = conn.send(m.error_response(primary.id, refused))  # releases the id
                await send_whole(send, 406, data)
                return
            stream = session.buffer.open_stream()
            priming = session.buffer.record(stream, b"")
            if place is not None:  # the request holds it until it ends
                place.handed_over = True
            session.start_request(primary, stream, place.release if place else None)
            await self._pump(receive, send, session, session.buffer.start(stream), priming)
            return
        if isinstance(primary, m.AutoReply):
            await _reply(send, primary.reply, conn.send(primary.reply))
            return
        if isinstance(primary, m.InvalidMessage):
            if primary.reply is not None:
                await _reply(send, primary.reply, conn.send(primary.reply))
            else:  # a notification or a response the session cannot take
                await _error(send, 400, primary.error.message, primary.error.code)
            return
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def _initialize(
        self, send: Send, message: Mapping[str, Any], json_ok: bool, client: str
    ) -> None:
        now = anyio.current_time()
        conn = m.Connection(m.SERVER, framing="messages", **self.connection_options)
        conn.receive_message(dict(message))
        event = conn.next_event(now)
        reply = event.reply if isinstance(event, (m.AutoReply, m.InvalidMessage)) else None
        if reply is None:  # (an initialize is always answered; nothing to keep otherwise)
            await _error(send, 400, "initialize was not accepted")
            return
        data = conn.send(reply)
        if isinstance(reply, m.ErrorResponse):  # (e.g. a server built without 2025 versions)
            # Always 400, whatever the code: the spec's versioning page has a 2026-only
            # HTTP server reject a 2025 initialize with 400 (the error names its versions).
            await send_whole(send, 400, data)
            return
        if not json_ok:
            await _error(send, 406, "Accept must include application/json")
            return
        if self.tasks is None:  # no lifespan: nowhere for a session's tasks to live
            await self._no_sessions(send, message)
            return
        if not self._make_room(client, now):  # only now: a refused initialize ends no session
            refusal = self.shares.refusal(client)
            assert refusal is not None
            log.warning("initialize refused: %s", refusal.message)
            await _refuse(send, refusal)
            return
        taken = self.shares.admit(client)  # (no wait since _make_room: the room is ours)
        assert taken is None
        session_id = secrets.token_urlsafe(SESSION_ID_BYTES)
        buffer = m.http.ReplayBuffer(self.replay_events, self.replay_bytes)
        session = Session(
            session_id,
            self.app,
            conn,
            buffer,
            legacy_answer_timeout=self.legacy_answer_timeout,
            on_work=self._on_work,
        )
        self.table.add(session_id, now)  # before any wait: the place made is ours
        self.owners[session_id] = client
        self.sessions[session_id] = session
        await self.tasks.start(session.run)
        await _reply(send, reply, data, [(b"mcp-session-id", session_id.encode())])

    def _make_room(self, client: str, now: float) -> bool:
        """Room in the table for one more session of ``client``: expired sessions end;
        past its share, its own session idle the longest ends; with the table full,
        the one idle the longest of the client holding the most (itself when it holds
        as many; then of anyone).
        ``False``: no room (each session that could end has work)."""
        for session_id in self.table.expired(now):
            log.info("session %s... expired", session_id[:8])
            self.end(session_id)
        refusal = self.shares.refusal(client)
        if refusal is None:
            return True
        if refusal.own_share:  # its own, never another client's
            idle = self.table.idle_longest(self._sessions_of(client))
        else:  # many clients fill the table: the heaviest gives way first (itself if tied)
            heaviest = max(self.owners.values(), key=self.shares.held_by)
            if self.shares.held_by(client) >= self.shares.held_by(heaviest):
                heaviest = client
            idle = self.table.idle_longest(self._sessions_of(heaviest))
            if idle is None:
                idle = self.table.idle_longest()
        if idle is None:
            return False
        log.info("session %s... ended to make room", idle[:8])
        self.end(idle)
        return self.shares.refusal(client) is None

    def _sessions_of(self, client: str) -> set[str]:
        return {session_id for session_id, owner in self.owners.items() if owner == client}

    async def _no_sessions(self, send: Send, message: Mapping[str, Any]) -> None:
        error = m.MrtrError(
            "this endpoint serves MCP 2026-07-28 only here: 2025-era sessions need the ASGI "
            "lifespan (run McpAsgi as the server's app, or enter McpAsgi.lifespan())",
            code=m.ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
            data={"supported": list(m.MODERN_VERSIONS)},
        )
        request_id = message.get("id")
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            request_id = None
        await send_whole(
            send, 400, m.wire._codec.encode_message(m.error_response(request_id, error))
        )

    # --- GET, DELETE ---

    async def get(
        self, receive: Receive, send: Send, headers: Headers, sse_ok: bool, client: str
    ) -> None:
        """The standalone stream, or the rest of a stream after ``Last-Event-ID``, for
        ``session_stream_lifetime`` at most; ``client``: whose share it counts against."""
        if not sse_ok:
            await _error(send, 406, "Accept must include text/event-stream")
            return
        priming: str | None = None
        try:
            session, read = self._lookup(headers)
            assert session is not None
            if read.last_event_id is not None:
                cursor = session.buffer.resume(read.last_event_id)
            elif STANDALONE in session.readers:
                await _error(
                    send, 409, "this session's standalone stream is already open: one at a time"
                )
                return
            else:  # primed like a request's stream, so a cut one can resume from the start
                priming = session.buffer.record(STANDALONE, b"")
                cursor = session.buffer.tail(STANDALONE)
                if not session.standalone_opened:
                    session.standalone_opened = True
                    session.restart_listen()  # the app's announcements reach it from now on
        except (SessionRefused, ReplayLost) as exc:
            status = exc.status if isinstance(exc, SessionRefused) else 400
            await _error(send, status, exc.message, exc.code)
            return
        refusal = self.streams.admit(session.id, client)
        if refusal is not None:
            log.warning("session stream refused: %s", refusal.message)
            await _refuse(send, refusal)
            return
        # No work of the session (an open GET alone must not pin it): its end is a use.
        deadline = anyio.current_time() + self.stream_lifetime
        try:
            await self._pump(receive, send, session, cursor, priming, deadline)
        finally:
            self.streams.release(session.id, client)
            if session.id in self.table:
                self.table.touch(session.id, anyio.current_time())

    async def delete(self, send: Send, headers: Headers) -> None:
        try:
            session, _ = self._lookup(headers)
        except SessionRefused as exc:
            await _error(send, exc.status, exc.message, exc.code)
            return
        assert session is not None
        log.info("session %s... deleted by its client", session.id[:8])
        self.end(session.id)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    # --- one stream as one HTTP response ---

    async def _pump(
        self,
        receive: Receive,
        send: Send,
        session: Session,
        cursor: Cursor,
        priming: str | None,
        deadline: float = math.inf,
    ) -> None:
        """Write ``cursor``'s stream as an SSE response until it ends, the session
        ends, a newer reader takes the stream, the client goes away, or ``deadline``
        (a GET stream's lifetime: the client resumes with ``Last-Event-ID``)."""
        me = object()
        if session.readers.get(cursor.stream) is not None:
            session.wake()  # the previous reader of this stream stops
        session.readers[cursor.stream] = me
        try:
            async with anyio.create_task_group() as tasks:
                sender = Sender(send, self.write_timeout, tasks.cancel_scope.cancel)
                await sender.start_stream()
                if priming is not None:
                    first = m.http.encode_sse("", id=priming, retry=SSE_RETRY_MS)
                    await sender.body(first, more=True)
                tasks.start_soon(watch_disconnect, receive, sender)
                await self._copy(sender, session, cursor, me, deadline)
                tasks.cancel_scope.cancel()
            if not sender.gone:
                await sender.body(b"", more=False)
        finally:
            if session.readers.get(cursor.stream) is me:
                del session.readers[cursor.stream]
                session.buffer.reader_gone(cursor.stream)

    async def _copy(
        self, sender: Sender, session: Session, cursor: Cursor, me: object, deadline: float
    ) -> None:
        interval = self.keepalive_interval if self.keepalive_interval > 0 else math.inf
        while session.readers.get(cursor.stream) is me and not session.closed:
            changed = session.changed
            try:
                events, cursor, done = session.buffer.read(cursor)
            except ReplayLost as exc:
                log.warning("session %s...: %s", session.id[:8], exc.message)
                return
            for event_id, data in events:
                if data:  # (a priming event is written once, by whoever opened the stream)
                    await sender.body(m.http.encode_sse(data.decode(), id=event_id), more=True)
            left = deadline - anyio.current_time()
            if done or left <= 0:
                return
            with anyio.move_on_after(min(interval, left)) as waited:
                await changed.wait()
            if waited.cancelled_caught and anyio.current_time() < deadline:
                await sender.body(m.http._sse.encode_sse_comment(), more=True)
